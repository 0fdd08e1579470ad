"""The architecture as a test: import-linter's contracts in .importlinter (the library's layers core < run <
analysis < plots < export/report/training < cli, and inside decoding and training; the library never imports streamlit or
the app; the app's rooms) hold on the tree, and break on a copy of it with an arrow going up; no two modules import
each other, directly or around a loop."""
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
    contracts = (ROOT / ".importlinter").read_text(encoding="utf-8").count("[importlinter:contract:")
    assert out.stdout.count("KEPT") == contracts >= 5 and "BROKEN" not in out.stdout


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


def import_cycles(graph) -> list[set]:
    """The graph's strongly connected components of more than one module (Tarjan): each holds an import cycle.
    Imports inside functions count too: they make the cycle at run time."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(m):
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in graph.find_modules_directly_imported_by(m):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            part = set()
            while True:
                n = stack.pop()
                on_stack.discard(n)
                part.add(n)
                if n == m:
                    break
            if len(part) > 1:
                found.append(part)

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return found


def test_no_import_cycle():
    import grimp
    graph = grimp.build_graph("viz_transformer", "viz_explorer", cache_dir=None)
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    import grimp
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"), ("p.d", "p.e")]:
        graph.add_import(importer=a, imported=b)
    assert import_cycles(graph) == [{"p.a", "p.b", "p.c"}]
