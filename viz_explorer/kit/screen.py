"""The width this session's figures are laid out for: a phone's narrow main column, or the desktop's.

A figure is laid out on the server for the width it will get (viz_transformer.plots.figure_rules); the browser
shrinks a wider one, so on a 390 px phone a heatmap built for 900 px had 4 px cells and labels on top of each
other. A phone says so in its User-Agent ("Mobi", as MDN recommends: iPhone and Android phones, not tablets); its
figures are laid out for figure_rules.PHONE_PX, and a long text's heatmaps show a narrower window of readable
cells. Presenter mode keeps its projector's layout. Light: streamlit and the figure rules, no torch."""
from __future__ import annotations

import functools

import streamlit as st

from viz_explorer.kit import presenter
from viz_transformer.plots import figure_rules


def is_phone() -> bool:
    try:
        agent = st.context.headers.get("User-Agent") or ""
    except Exception:  # noqa: BLE001 - no request to read (a bare script, a test runner)
        return False
    return "Mobi" in agent


def figure_px() -> int:
    return figure_rules.PHONE_PX if is_phone() and not presenter.active() else figure_rules.FIGURE_PX


def laid_out(fn):
    """fn's figures laid out for this session's screen (the page run has it from app.py; a fragment reruns alone)."""
    @functools.wraps(fn)
    def run(*args, **kw):
        with figure_rules.screen(figure_px()):
            return fn(*args, **kw)
    return run
