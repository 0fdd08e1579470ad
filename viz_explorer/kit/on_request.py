"""Work beyond the sidebar's run (a sweep over every head, a second text, a run without positions) on a large
model: done when the person asks, not when the page opens, so every page's first view stays quick.

A small model (the shipped checkpoints) computes it at once, as before. A large one (an imported Hugging Face
model: a forward at 128 tokens takes about a second per 300 M parameters on 2 cores) shows a button; once
pressed for some inputs, the page computes (its result is cached) and later reruns with the same inputs
show it without asking again.
"""
from __future__ import annotations

from typing import Hashable

import streamlit as st

from viz_explorer.kit.strings import t

LARGE = 50_000_000       # parameters from which extra runs wait for a click (the shipped models have < 20 M)
ASKED = "_viz_asked"     # session_state: the (part, inputs) pairs the person has asked for


def n_params(hm) -> int:
    return sum(p.numel() for p in hm.model.parameters())


def is_large(hm) -> bool:
    return n_params(hm) >= LARGE


def asked(hm, part: str, inputs: Hashable, label: str, where=None) -> bool:
    """Whether the page computes `part` for `inputs` now: at once for a small model; for a large one when
    its button (labelled `label`) is pressed, or was pressed for these inputs earlier in the session."""
    if not is_large(hm):
        return True
    done = st.session_state.setdefault(ASKED, set())
    if (part, inputs) in done:
        return True
    where = where or st
    where.caption(t("req.large", params=f"{n_params(hm) / 1e6:,.0f}"))
    if where.button(label, key=f"req_{part}", type="primary", icon=":material/play_arrow:"):
        done.add((part, inputs))
        return True
    return False
