"""The package (pyproject.toml, setup.py, viz_explorer/launch.py): what `viz-transformer app` runs, and a real
install into a fresh venv used from another folder."""
import os
import subprocess
import sysconfig
import sys
import tomllib
from pathlib import Path

import pytest

from viz_explorer import launch

ROOT = Path(__file__).resolve().parents[1]


def test_the_settings_become_flags_with_the_same_values():
    config = ROOT / ".streamlit" / "config.toml"
    flags = launch.settings_flags(config)
    settings = tomllib.loads(config.read_text(encoding="utf-8"))
    assert len(flags) == sum(len(v) for v in settings.values())
    assert "--server.fileWatcherType=none" in flags and "--runner.postScriptGC=false" in flags
    assert f"--server.maxUploadSize={settings['server']['maxUploadSize']}" in flags


def test_app_runs_streamlit_on_the_checkouts_app_with_the_checkpoint_roots(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    cmd, env = launch.app_command(["--checkpoints", str(a), "--checkpoints", str(b), "--server.port", "8599"], {})
    assert cmd[1:3] == ["-m", "streamlit"] and cmd[3:5] == ["run", str(ROOT / "app.py")]   # no server started here
    assert cmd[-2:] == ["--server.port", "8599"]          # the user's flags come last: they win
    assert "--server.runOnSave=false" in cmd
    assert env["VIZ_CHECKPOINTS"].split(os.pathsep) == [str(a), str(b)]
    assert env["VIZ_LESSONS"] == str(ROOT / "lessons")
    assert "VIZ_DATA" not in env                          # a checkout keeps data/ beside app.py


def test_app_keeps_a_checkpoints_variable_already_set():
    cmd, env = launch.app_command([], {"VIZ_CHECKPOINTS": "/somewhere"})
    assert env["VIZ_CHECKPOINTS"] == "/somewhere"


@pytest.mark.slow          # builds a wheel and makes a venv
def test_an_installed_package_runs_from_another_folder(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    # The new venv sees the packages of the environment running the tests (a virtual environment's, not its base
    # interpreter's, which --system-site-packages would give): pip, setuptools and torch, with nothing downloaded.
    inner = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           check=True, capture_output=True, text=True).stdout.strip()
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(inner) / "outer-environment.pth").write_text("".join(p + "\n" for p in sorted(outer)))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(ROOT)],
                   check=True, cwd=tmp_path, timeout=600)
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.pop("VIZ_CHECKPOINTS", None)
    out = subprocess.run([str(venv / "bin" / "viz-transformer"), "--help"], cwd=away, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "usage: viz-transformer" in out.stdout and "viz-transformer app" in out.stdout
    where = subprocess.run([str(py), "-c", "import viz_explorer.launch as l; print(l.__file__, l.root())"],
                           cwd=away, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    module, root = where.stdout.split()
    assert Path(module).is_relative_to(venv) and Path(root).is_relative_to(venv)
    for shipped in ("app.py", "lessons/positions-and-masks.json", ".streamlit/config.toml"):
        assert (Path(root) / shipped).is_file(), shipped
    assert (Path(module).parent / "classroom" / "class_watch.js").is_file()      # read by the class page at run time
    no_models = subprocess.run([str(venv / "bin" / "viz-transformer"), "app"], cwd=away, env=env,
                               capture_output=True, text=True, timeout=120)
    assert no_models.returncode == 2 and "--checkpoints" in no_models.stderr
