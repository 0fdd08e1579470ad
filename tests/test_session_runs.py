"""A session keeps no text's run alive beside the memo's budget: after a page run its Context (kept in session state
for the next run and its fragments) holds the Run only weakly, so once the memo lets the run go it is freed, however
many sessions (and closed sessions, kept two minutes) the server has. Read again afterwards, the run is the text's
own (its output equal to a fresh run of the model)."""
from __future__ import annotations

import gc
import weakref

import pytest

from app_util import ZH, open_app, page_file
from viz_explorer.kit import context
from viz_explorer.server import cached


@pytest.mark.parametrize("page", ["overview", "attention", "masks", "step_by_step", "why", "decoding", "lens", "knockout", "positions", "compare", "patching", "rollout"])
def test_a_finished_page_run_leaves_the_run_to_the_memo(page):
    at = open_app(page_file(page), text=ZH)
    ctx = at.session_state[context.CTX]
    gone = weakref.ref(ctx.run)
    output = ctx.run.output
    cached.memo().clear()
    for slot in (cached.BIG_RUN, cached.TERM_RUN):
        assert slot not in at.session_state or not at.session_state[slot]      # a small run is the memo's alone
    gc.collect()
    assert gone() is None, f"something {page} left in the session still holds the text's run"
    again = ctx.run                                            # read again from the memo (computed anew)
    assert again.output == output == ctx.hm.run(ZH, lean=True).output
