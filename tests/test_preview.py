"""A fresh server's first Overview (viz_explorer/startup/preview.py): what it draws before the model is loaded is read
without torch, and agrees with the model once loaded; the light modules never import torch."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from viz_explorer.server import defaults
from viz_explorer.startup import warmup
from viz_explorer.startup import preview

ROOT = Path(__file__).resolve().parent.parent
LIGHT = ["viz_transformer.plots.diagram", "viz_transformer.core.checkpoint_files", "viz_transformer.core.encoding",
         "viz_explorer.server.defaults", "viz_explorer.startup.warmup", "viz_explorer.kit.page_parts", "viz_explorer.kit.overview_head",
         "viz_explorer.startup.preview", "viz_explorer.startup.prestart"]


@pytest.mark.slow          # a fresh python process
def test_the_light_modules_leave_torch_out():
    code = (f"import sys\nfor m in {LIGHT!r}: __import__(m)\n"
            "from viz_explorer.startup import preview\nmade = preview.sketch()\n"
            "print('torch' in sys.modules, made is not None)\n"
            "from viz_transformer import load_checkpoint, CheckpointError\n"      # the package's names still work
            "print('torch' in sys.modules, load_checkpoint.__module__, CheckpointError.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stdout.strip().splitlines()[-2:]
    assert first == "False True"              # the diagram, the config and the tokenizer read: no torch
    assert second == "True viz_transformer.run.capture CheckpointError"


def _as_default(src: Path, tmp_path: Path) -> Path:
    """A checkpoints folder whose default checkpoint (defaults.CHECKPOINT) is a copy of `src`."""
    shutil.copytree(src, tmp_path / defaults.CHECKPOINT)
    return tmp_path


@pytest.mark.parametrize("name", ["tiny-zh-en", "tiny-lm", "tiny-zh-en-decoder"])
def test_the_sketch_has_the_models_own_lengths(ckpt_root, tmp_path, name):
    from viz_transformer import load_checkpoint
    made = preview.sketch(_as_default(ckpt_root / name, tmp_path))
    hm = load_checkpoint(tmp_path / defaults.CHECKPOINT)
    run = hm.run(defaults.EXAMPLES[defaults.kind(hm.cfg)][0])
    assert made.cfg == hm.cfg
    assert made.src_len == (len(run.src_ids) if run.src_ids is not None else None)
    assert made.tgt_len == run.prompt_len                   # the decoder before its first output token
    assert run.tgt_ids[:made.tgt_len] == list(run.input.prompt)


def test_no_sketch_without_a_readable_default(ckpt_root, tmp_path):
    assert preview.sketch(tmp_path) is None                                  # no zh-en folder
    root = _as_default(ckpt_root / "tiny-zh-en", tmp_path)
    (root / defaults.CHECKPOINT / "config.json").write_text("{not json", encoding="utf-8")
    assert preview.sketch(root) is None
    (root / defaults.CHECKPOINT / "config.json").write_text(json.dumps({"model_type": "marian"}), encoding="utf-8")
    assert preview.sketch(root) is None                                      # a Hugging Face folder: not ours


def test_the_light_config_reader_is_the_checkpoints(ckpt_root):
    from viz_transformer.core import checkpoint, checkpoint_files
    folder = ckpt_root / "tiny-lm"
    assert checkpoint_files.read_config_json(folder) == checkpoint.read_config(folder)
    assert checkpoint.CheckpointError is checkpoint_files.CheckpointError


def test_prestart_starts_only_when_no_session_is_importing(monkeypatch):
    monkeypatch.setattr(warmup, "_prestart", None)
    started = []

    def start():
        started.append(1)
        warmup.prestarting(threading.Event())

    warmup._imports.acquire()                     # a session of `streamlit run app.py` imports in its own run
    try:
        assert warmup.prestart_or_busy(start) is False and not started
    finally:
        warmup._imports.release()
    assert warmup.prestart_or_busy(start) is True and started == [1]
    assert warmup.prestart_or_busy(start) is True and started == [1]       # once: then the others wait for it
    assert warmup._imports.acquire(blocking=False)                           # and the lock was given back
    warmup._imports.release()


@pytest.fixture
def fresh_warmup(monkeypatch):
    """warmup's state as in a fresh serve.py process whose prestart thread has not imported its light part;
    the blank chart recorded, with whether plotly's import lock was held while it was made."""
    light = threading.Event()
    monkeypatch.setattr(warmup, "_plotly", threading.Lock())
    monkeypatch.setattr(warmup, "_arrived", threading.Event())
    monkeypatch.setattr(warmup, "_prestart", threading.Event())
    monkeypatch.setattr(warmup, "_light", light)
    sent = []
    monkeypatch.setattr(warmup, "first_chart", lambda slot: sent.append(warmup._plotly.locked()))
    return light, sent


def test_the_first_run_imports_plotly_before_the_light_part(fresh_warmup):
    light, sent = fresh_warmup
    entered = threading.Event()

    def light_part():
        with warmup.first_visit(30):
            entered.set()

    thread = threading.Thread(target=light_part, daemon=True)
    thread.start()
    assert not entered.wait(0.3)              # the light part waits for a first run (up to ARRIVE_S)
    assert warmup.plotly_first(None) is True and sent == [True]     # made under the lock: nobody imports beside
    assert entered.wait(5)                    # then the light part goes on
    thread.join(5)


def test_no_blank_chart_while_the_light_part_imports(fresh_warmup):
    light, sent = fresh_warmup
    with warmup.first_visit(0):               # the light part (ARRIVE_S passed) is importing plotly
        assert warmup.plotly_first(None) is False and sent == []
    assert warmup._arrived.is_set()           # the light part need not wait for a run any more
    light.set()                               # imported: any run may send it, without the lock
    assert warmup.plotly_first(None) is True and sent == [False]


def test_the_heavy_part_waits_for_the_preview_drawn(monkeypatch):
    from viz_explorer.startup import prestart
    for name in ("_visitor", "_seen"):
        monkeypatch.setattr(prestart, name, threading.Event())
    prestart.visited(preview=True)            # sent: the heavy part still waits for the browser's poll
    assert prestart._visitor.is_set() and not prestart._seen.is_set()
    prestart.seen()
    assert prestart._seen.is_set()
    monkeypatch.setattr(prestart, "_seen", threading.Event())
    prestart.visited(preview=False)           # a deep link or another page: nothing to draw first
    assert prestart._seen.is_set()


def test_a_later_chart_of_the_first_run_waits_for_the_light_part(fresh_warmup, monkeypatch):
    """plotly_first lets the light part start; the same run's next chart (plotly_early's, on any page but the
    preview) must not use plotly while that part is importing pandas (it found pandas half-made)."""
    light, _ = fresh_warmup
    made = []
    monkeypatch.setattr(warmup, "_imports", threading.Lock())
    monkeypatch.setattr(warmup, "_send_blank", lambda note: made.append(light.is_set()))
    run = threading.Thread(target=lambda: warmup.imported(warmup.plotly_early("")), daemon=True)
    run.start()
    run.join(0.3)
    assert made == []                          # still waiting for the light part
    light.set()
    for _ in range(100):
        if made:
            break
        run.join(0.05)
    assert made == [True]
    warmup._prestart.set()                     # the heavy part done: the run goes on
    run.join(5)
    assert not run.is_alive()
