"""The app sets torch's intra-op threads itself (viz_explorer/server/threads.py), whatever command started it:
one thread, the count measured best on a busy machine (benchmarks/bench_threads.py), unless VIZ_THREADS or
OMP_NUM_THREADS says otherwise. The expectations are the numbers the README states, not the module's constant."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app_util import APP
from conftest import ROOT

ONE = 1                                  # README, "Benchmarks": one thread, measured


@pytest.fixture
def no_thread_env(monkeypatch, ckpt_root):
    """No thread setting in the environment (restored afterwards, though app.py sets OMP_NUM_THREADS), tiny models."""
    for var in ("VIZ_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))


def in_a_new_thread() -> int:
    """torch's thread count as a thread that has not used torch yet sees it (a new session's script thread): with
    OpenMP, a thread that has keeps its own count."""
    got = []
    t = threading.Thread(target=lambda: got.append(torch.get_num_threads()))
    t.start(), t.join()
    return got[0]


def test_an_app_run_sets_one_thread_even_after_torch_was_imported(no_thread_env):
    torch.set_num_threads(2)             # as torch's default on two cores (conftest resets it after the test)
    assert in_a_new_thread() == 2
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert in_a_new_thread() == ONE
    assert os.environ["OMP_NUM_THREADS"] == str(ONE)       # and for what it starts


def test_a_run_while_another_thread_imports_torch_leaves_torch_alone(no_thread_env, monkeypatch):
    """A reload while the start-up load is importing torch: torch is in sys.modules, half built (no functions yet).
    The run must not touch it (it failed with "partially initialized module 'torch'"); torch reads the policy from
    OMP_NUM_THREADS when its import finishes."""
    import importlib.machinery
    import types
    from viz_explorer.server import threads
    half = types.ModuleType("torch")
    half.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    half.__spec__._initializing = True               # as importlib marks a module whose import is under way
    monkeypatch.setitem(sys.modules, "torch", half)
    assert threads.apply() == ONE and os.environ["OMP_NUM_THREADS"] == str(ONE)


@pytest.mark.parametrize("env,want", [({"VIZ_THREADS": "3"}, 3), ({"OMP_NUM_THREADS": "2"}, 2),
                                      ({"VIZ_THREADS": "3", "OMP_NUM_THREADS": "2"}, 3),
                                      ({"OMP_NUM_THREADS": "4,2"}, 4),          # OpenMP's nested form: the first
                                      ({"VIZ_THREADS": "many"}, ONE), ({"OMP_NUM_THREADS": "0"}, ONE), ({}, ONE)])
def test_the_count_honours_an_explicit_setting(monkeypatch, env, want):
    from viz_explorer.server import threads
    for var in ("VIZ_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert threads.count() == want


START = {   # `streamlit run app.py`'s and `streamlit run serve.py`'s start-up in a fresh process, then torch
    "app.py": "from streamlit.testing.v1 import AppTest; AppTest.from_file('app.py').run(timeout=120)",
    "serve.py": "import runpy; runpy.run_path('serve.py')",
}


@pytest.mark.slow          # a python process each
@pytest.mark.parametrize("command", START)
@pytest.mark.parametrize("env,want", [({}, ONE), ({"VIZ_THREADS": "2"}, min(2, os.cpu_count() or 1))])  # torch caps
def test_a_fresh_process_gets_the_policy_before_torch_is_imported(ckpt_root, command, env, want):      # at the cores
    base = {k: v for k, v in os.environ.items() if k not in ("VIZ_THREADS", "OMP_NUM_THREADS")}
    probe = START[command] + "; import torch; print(torch.get_num_threads())"
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=dict(base, **env, VIZ_CHECKPOINTS=str(ckpt_root), PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) == want, (r.stdout, os.cpu_count())
