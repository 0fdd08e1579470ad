"""A lesson on a server without its model says so in one line (naming the model and what the server has), never as a
broken claim; a lesson read while another model is open names its own model, and "Back to the lesson step" opens it."""
from __future__ import annotations

import shutil

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, ROOT
from viz_explorer.kit.strings import EN


def open_lesson(name: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lesson"] = name
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_lesson_whose_model_is_missing_says_so_in_one_line(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "checkpoints" / "en-stories", tmp_path / "en-stories")
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(tmp_path))
    at = open_lesson("multi-head-attention")
    warnings = [w.value for w in at.warning]
    said = [w for w in warnings if "zh-en-postnorm" in w]
    assert len(said) == 1 and "\n" not in said[0] and "en-stories" in said[0]
    assert said[0] == EN["ls.no_model"].format(model="zh-en-postnorm", have="en-stories")
    assert not any("does not hold" in w for w in warnings)


def test_a_lesson_read_on_another_model_offers_its_own(monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = open_lesson("multi-head-attention")
    assert at.session_state["ckpt"] == "zh-en-postnorm"
    assert not [i for i in at.info if "written for" in i.value]
    at.session_state["ckpt"] = "zh-en"                                  # the student picks another model
    at.run()
    assert [i.value for i in at.info if "written for" in i.value] == [
        EN["ls.other_model"].format(model="zh-en-postnorm", current="zh-en")]
    at.button(key="ls_restore").click().run()
    at.run()
    assert at.session_state["ckpt"] == "zh-en-postnorm"
    assert not [i for i in at.info if "written for" in i.value]
