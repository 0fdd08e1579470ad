"""Your folders beside ours: VIZ_CHECKPOINTS adds roots (separated as PATH is) to the shipped
checkpoints folder; a root may be one model folder; a name that clashes with an earlier root's is listed with
its root's name, so a ?checkpoint= link to a shipped name keeps its meaning; VIZ_CHECKPOINTS_ONLY=1 lists the
given roots alone (what every other test uses, set in conftest.py)."""
from __future__ import annotations

import os
import shutil

import pytest

from app_util import by_key, open_app
from viz_explorer.server import defaults
from viz_transformer import list_roots


@pytest.fixture
def roots(ckpt_root, tmp_path):
    """Two user roots: a folder of models (one named as a shipped one, one as the first root's) and a root
    that is itself one model folder."""
    a, b = tmp_path / "a", tmp_path / "mine"
    shutil.copytree(ckpt_root / "tiny-lm", a / "zh-en")                # clashes with the shipped zh-en
    shutil.copytree(ckpt_root / "tiny-prefix", a / "my-prefix")
    shutil.copytree(ckpt_root / "tiny-zh-en", b)                      # the root is the model
    return a, b


def test_roots_are_added_to_the_shipped_folder(roots, monkeypatch):
    a, b = roots
    monkeypatch.delenv("VIZ_CHECKPOINTS_ONLY", raising=False)
    monkeypatch.setenv("VIZ_CHECKPOINTS", os.pathsep.join([str(a), "", str(b)]))
    assert defaults.checkpoint_roots() == [defaults.SHIPPED, a, b]
    monkeypatch.setenv("VIZ_CHECKPOINTS_ONLY", "1")
    assert defaults.checkpoint_roots() == [a, b]
    monkeypatch.delenv("VIZ_CHECKPOINTS")
    assert defaults.checkpoint_roots() == [defaults.SHIPPED]


def test_a_clashing_name_gets_its_root_and_the_first_keeps_its_meaning(roots, ckpt_root, tmp_path):
    a, b = roots
    c = tmp_path / "c"
    shutil.copytree(ckpt_root / "tiny-lm", c / "zh-en")
    infos = {i.name: i for i in list_roots([defaults.SHIPPED, a, b, c, tmp_path / "missing"])}
    assert infos["zh-en"].path == defaults.SHIPPED / "zh-en"
    assert infos["zh-en (a)"].path == a / "zh-en" and infos["zh-en (c)"].path == c / "zh-en"
    assert infos["my-prefix"].error is None and infos["mine"].path == b and infos["mine"].error is None
    assert infos["mine"].config.architecture == "encoder_decoder"


def test_the_sidebar_lists_the_shipped_models_and_both_roots(roots, monkeypatch):
    a, b = roots
    monkeypatch.delenv("VIZ_CHECKPOINTS_ONLY", raising=False)
    monkeypatch.setenv("VIZ_CHECKPOINTS", os.pathsep.join([str(a), str(b)]))
    at = open_app(ckpt="mine", text="我爱你。")
    box = by_key(at.sidebar.selectbox, "ckpt")
    shipped = sorted(p.name for p in defaults.SHIPPED.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    assert set(shipped) | {"zh-en (a)", "my-prefix", "mine"} <= set(box.options), box.options
    assert box.value == "mine" and not at.exception
