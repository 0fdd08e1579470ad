"""A fresh server's first Overview (views/shell/preview.py): what it draws before the model is loaded is read
without torch, and agrees with the model once loaded; the light modules never import torch."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from views.server import defaults, warmup
from views.shell import preview

ROOT = Path(__file__).resolve().parent.parent
LIGHT = ["viz_transformer.plots.diagram", "viz_transformer.core.checkpoint_files", "viz_transformer.core.encoding",
         "views.server.defaults", "views.server.warmup", "views.shell.page_parts", "views.shell.overview_head",
         "views.shell.preview", "views.shell.prestart"]


@pytest.mark.slow          # a fresh python process
def test_the_light_modules_leave_torch_out():
    code = (f"import sys\nfor m in {LIGHT!r}: __import__(m)\n"
            "from views.shell import preview\nmade = preview.sketch()\n"
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
