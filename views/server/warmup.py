"""A fresh server's first run: the browser starts on Plotly while the server is still importing torch.

Streamlit loads its chart bundle (4.7 MB of plotly.js) only when a page first shows a chart, and the first
page's charts come after the server has imported torch and loaded and run the model: the two waits added
up. A blank 10-pixel chart sent before those imports starts the bundle's download and compile at once;
it is removed when the run ends. Later runs (torch already imported) send nothing.
The same goes for two other large element bundles the first page uses: code (the syntax highlighter,
1.6 MB, and its font) and formulas (KaTeX and its fonts): cold start 10.05 -> 9.38 s (median of 5, side by side).
A table would load DataFrame and Arrow (1.2 MB) too, but sending one imports pandas first: no faster.

Sessions that start together on a fresh process take turns until the imports are done: plotly's checks look
numpy and pandas up in sys.modules, and would find them half-imported by another session's thread.
"""
from __future__ import annotations

import sys
import threading
from typing import Optional

import streamlit as st

from views.server import prestart
from views.shell.strings import t

_imports = threading.Lock()      # held from the blank chart until the heavy imports are done


def plotly_early() -> Optional[object]:
    """In a process that has not imported torch yet: a placeholder holding a blank chart (else None).
    Call imported() once the heavy imports are done (in a finally)."""
    if _imported():
        return None
    _imports.acquire()
    if _imported():                             # another session did the imports while this one waited
        _imports.release()
        return None
    try:
        slot = _send_blank()
        prestart.wait()             # a class server (serve.py) is importing them already: wait for it
        return slot
    except BaseException:
        _imports.release()
        raise


def _imported() -> bool:
    """torch is imported, and no prestart thread (serve.py) is still at work."""
    return "torch" in sys.modules and prestart.done()


def imported(slot) -> None:
    """The heavy imports are done: let the next session in."""
    if slot is not None:
        _imports.release()


def _send_blank():
    slot = st.empty()
    blank = {"data": [{"type": "scatter", "x": [], "y": [], "hoverinfo": "skip"}],
             "layout": {"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}, "xaxis": {"visible": False},
                        "yaxis": {"visible": False}}}
    with slot.container():
        st.caption(t("warmup.loading"))                   # what a student sees meanwhile: no error, no blank page
        with st.container(height=10, border=False):     # 10 pixels: rendered (their bundles load), not seen
            st.plotly_chart(blank, config={"staticPlot": True, "displayModeBar": False}, key="warmup_plotly")
            st.code(" ", language=None)
            st.latex(r"\,")
    return slot


def done(slot) -> None:
    if slot is not None:
        slot.empty()
