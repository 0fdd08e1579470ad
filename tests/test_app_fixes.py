"""Issue 21's smaller defects, each through the page that showed it (AppTest on the tiny checkpoints):
Play ends as Play, probabilities are formatted one way, the knock-out ranking is sorted and its grids share
one scale, head statistics show role and evidence first, and the Chinese interface names blocks in Chinese."""
from __future__ import annotations

import shutil

import pytest

from app_util import ZH, by_key, open_app
from viz_transformer import decode, load_checkpoint

from test_app_architectures import snap_root  # noqa: F401  (a tiny checkpoint with training snapshots)
from test_core_train import pairs_tsv  # noqa: F401


@pytest.fixture
def env(ckpt_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    return ckpt_root


# -- Play: once the last step is drawn, the button says Play again ----------------------------------
def test_decoding_play_ends_with_a_play_button(env):
    n = len(decode(load_checkpoint(env / "tiny-zh-en"), ZH, max_new_tokens=20).steps)
    at = open_app("views/decoding.py")
    assert at.button(key="dc_play").label == "Play"
    at.session_state["dc_step"] = n - 1
    at.button(key="dc_play").click().run(timeout=60)           # plays the last step, then stops
    assert f"Step {n} of {n}" in at.get("progress")[0].proto.text
    assert at.button(key="dc_play").label == "Play"
    assert at.session_state["dc_playing"] is False


def test_training_play_ends_with_a_play_button(snap_root, ckpt_root, monkeypatch):  # noqa: F811
    shutil.copytree(ckpt_root / "tiny-zh-en", snap_root / "tiny-zh-en", dirs_exist_ok=True)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(snap_root))
    at = open_app("views/training.py", "tiny-trained")
    n = len(at.select_slider(key="tr_slider").options)
    at.session_state["tr_step"] = n - 2
    by_key(at.button, "tr_play").click().run(timeout=60)
    assert at.session_state["tr_step"] == n - 1
    assert by_key(at.button, "tr_play").label == "Play"
