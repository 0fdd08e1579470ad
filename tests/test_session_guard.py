"""A page that fails resets its own settings and nothing else (viz_explorer/kit/session_guard.py): in a class, the
teacher's right, the class, the open lesson, the language, the text and the other pages' settings survive; a
second failure in a row is shown, not looped; and every key a page makes is one of its own (registry.PageSpec.keys)
or a shared one, so the reset reaches what the page owns."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, open_app, page_file
from test_app_class import env  # noqa: F401  (the fixture: tiny checkpoints, a database of its own)
from viz_explorer.classroom import store as cr
from viz_explorer.kit import registry, session_guard, widgets
from viz_explorer.kit.strings import EN


def _fail_once(monkeypatch, times: int = 1) -> list:
    """The attention page's head picker raises `times` times, then works: a page bug the session cannot cause."""
    calls, real = [], widgets.block_layer_head

    def flaky(*args, **kw):
        calls.append(1)
        if len(calls) <= times:
            raise RuntimeError("a bug in the page")
        return real(*args, **kw)
    monkeypatch.setattr(widgets, "block_layer_head", flaky)
    return calls


def test_a_failing_page_keeps_the_class_the_lesson_and_the_text(env, monkeypatch):
    code, secret = cr.create_class("attention-step-by-step", env)
    at = AppTest.from_file(APP, default_timeout=90)
    kept = {"ckpt": "tiny-zh-en", "text": "我爱你。", "lang": "zh", "lc_teach": (code, secret), "lc_class": code,
            "lc_me": "a" * 16, "mk_layer": 1, "_link_stored": {"x": "y" * 16}}
    for k, v in kept.items():
        at.session_state[k] = v
    at.query_params["lesson"] = "attention-step-by-step"
    at.run()
    at.switch_page(page_file("attention"))
    at.run()
    kept = {k: at.session_state[k] for k in kept}                  # as the lesson's step left them
    at.session_state["at_layer"] = 1                               # the failing page's own setting
    calls = _fail_once(monkeypatch)
    at.run()
    assert not at.exception and len(calls) >= 2                   # it failed, was healed and ran again
    assert {k: at.session_state[k] for k in kept} == kept          # what the session holds beyond the page survives
    assert "at_layer" not in at.session_state or at.session_state["at_layer"] == 0   # its own: back to the default
    assert [t.value for t in at.toast] and at.get("plotly_chart")
    assert at.query_params["lesson"] in ("attention-step-by-step", ["attention-step-by-step"])


def test_a_second_failure_in_a_row_is_shown(env, monkeypatch):
    at = open_app(page_file("attention"))
    calls = _fail_once(monkeypatch, times=10)
    at.run()
    assert len(at.exception) == 1 and len(calls) == 2             # healed once, then shown (redacted, as configured)
    assert at.session_state["text"] and at.session_state["ckpt"] == "tiny-zh-en"


def test_own_keys_are_the_pages_prefixes_only():
    keys = ["at_layer", "at_head", "attention", "lc_teach", "text", "_link_stored", 3, "mk_layer"]
    assert session_guard.own_keys(keys, ("at_",)) == ["at_layer", "at_head"]
    assert session_guard.own_keys(keys, ()) == []


def test_every_key_a_page_makes_is_its_own_or_shared(env):
    """Each page opened in a fresh session; the keys it adds beyond the Overview's (the sidebar's, shared) must start
    with one of its PageSpec.keys, or the reset would miss them."""
    base = set(open_app().session_state.keys())
    missed = {}
    for spec in registry.PAGES:
        at = open_app(page_file(spec.name))
        new = {k for k in at.session_state.keys() if isinstance(k, str) and not k.startswith(("_", "$$"))}
        own = set(session_guard.own_keys(new, spec.keys))
        stray = sorted(k for k in new - base - own if not k.startswith("html_"))   # a figure's download: no setting
        if stray:
            missed[spec.name] = stray
    assert not missed, missed
