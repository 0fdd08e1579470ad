"""The architecture as a test: import-linter's contracts in .importlinter (the library's layers core < run <
analysis < plots < export/report/training < cli; the library never imports streamlit or the app; the app's
pages < shell < server) hold on the tree, and break on a copy of it with an arrow going up."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"]


def lint(where: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(where), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(LINT + ["--config", str(where / ".importlinter"), "--no-cache"], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_tree_keeps_every_contract():
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("KEPT") == 3 and "BROKEN" not in out.stdout


def test_an_upward_import_or_streamlit_in_the_library_breaks_them(tmp_path):
    for name in ("viz_transformer", "viz_explorer"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path)
    clean = lint(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr          # the copy itself is fine
    encoding = tmp_path / "viz_transformer" / "core" / "encoding.py"
    encoding.write_text(encoding.read_text(encoding="utf-8") + "\nfrom viz_transformer.plots import heatmaps  # noqa\n",
                        encoding="utf-8")
    lenses = tmp_path / "viz_transformer" / "run" / "lenses.py"
    lenses.write_text(lenses.read_text(encoding="utf-8") + "\nimport streamlit  # noqa\n", encoding="utf-8")
    broken = lint(tmp_path)
    assert broken.returncode != 0
    text = " ".join(broken.stdout.split())
    assert "viz_transformer.core is not allowed to import viz_transformer.plots" in text
    assert "viz_transformer.core.encoding -> viz_transformer.plots.heatmaps" in text
    assert "viz_transformer.run.lenses -> streamlit" in text
