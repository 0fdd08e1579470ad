"""A large model's extra runs wait for a click (viz_explorer/kit/on_request.py): with the threshold lowered so that a
tiny checkpoint counts as large, the positions, comparison and patching pages open without running anything
beyond the sidebar's run, show a button, and once it is pressed show what a small model shows at once."""
from __future__ import annotations

import pytest

from tests.app_util import figures, open_app
from viz_explorer.kit import on_request

PAGES = {"viz_explorer/pages/experiment/positions_on_off.py": "req_positions",
         "viz_explorer/pages/experiment/compare_inputs.py": "req_compare",
         "viz_explorer/pages/experiment/patching.py": "req_patching"}


def _open(page):
    at = open_app(page)
    if "patching" in page:                    # a second text the tiny tokenizer cuts into as many pieces
        at.session_state["pt_text_translator"] = "我是一名工作师。"
        at.run(timeout=90)
    return at


def _spec(at):
    return [(f["layout"]["title"]["text"], str(f["data"])) for f in figures(at)]


@pytest.mark.parametrize("page", list(PAGES))
def test_a_large_models_extra_runs_wait_for_the_button(env, monkeypatch, page):
    small = _open(page)                                  # the shipped behaviour: everything at once
    assert figures(small) and not [b for b in small.button if b.key == PAGES[page]]
    monkeypatch.setattr(on_request, "LARGE", 1)             # every model is large now
    at = _open(page)
    n_params = on_request.n_params(__import__("viz_transformer").load_checkpoint(env / "tiny-zh-en"))
    assert any(f"{n_params / 1e6:,.0f} M parameters" in c.value for c in at.caption)
    assert len(figures(at)) < len(figures(small))
    [button] = [b for b in at.button if b.key == PAGES[page]]
    button.click()
    at.run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    assert _spec(at) == _spec(small)                        # the same figures, data and all
    at.run(timeout=60)                                      # asked once for these inputs: no button again
    assert not [b for b in at.button if b.key == PAGES[page]] and _spec(at) == _spec(small)
