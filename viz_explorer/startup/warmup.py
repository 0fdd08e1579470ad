"""A fresh server's first run: the browser starts on Plotly while the server is still importing torch.

Streamlit loads its chart bundle (4.7 MB of plotly.js) only when a page first shows a chart, and the first
page's charts come after the server has imported torch and loaded and run the model: the two waits added
up. A blank 10-pixel chart sent before those imports starts the bundle's download and compile at once;
it is removed when the run ends. Later runs (torch already imported) send nothing.
The same goes for two other large element bundles the first page uses: code (the syntax highlighter,
1.6 MB, and its font) and formulas (KaTeX and its fonts): cold start 10.05 -> 9.38 s (median of 5, side by side).
A table would load DataFrame and Arrow (1.2 MB) too, but sending one imports pandas first: no faster.

Sessions that start together on a fresh process take turns until the imports are done: plotly's checks look
numpy and pandas up in sys.modules, and would find them half-imported by another session's thread. With a
prestart thread (viz_explorer/startup/prestart.py), plotly may be used once its light part is imported: then the blank
chart is the first thing a run sends (plotly_first), and the Overview's preview draws (viz_explorer/startup/preview.py).
"""
from __future__ import annotations

import sys
import threading
from typing import Callable, Optional

import streamlit as st


_imports = threading.Lock()      # held from the blank chart until the heavy imports are done
_prestart: Optional[threading.Event] = None     # viz_explorer.startup.prestart's thread (serve.py): set when it is done
_light: Optional[threading.Event] = None        # that thread's light part (numpy, pandas, plotly) is imported
_plotly = threading.Lock()       # held while plotly is first imported: by a first run (its blank chart) or by
                                 # prestart's light part, never both at once
_arrived = threading.Event()     # a first run has started (and sent its blank chart, when it could)
WAIT_S = 120.0                   # the most a first run waits for that thread (a slow disk, a big model)


def prestarting(done: threading.Event, light: Optional[threading.Event] = None) -> None:
    """A thread is importing torch and loading the model already (viz_explorer/startup/prestart.py); `done` is set
    when it has finished, `light` when plotly may be used beside it. The first page runs wait for it instead
    of importing beside it."""
    global _prestart, _light
    _prestart, _light = done, light


def plotly_first(slot) -> bool:
    """A fresh process with a prestart thread (serve.py): a blank chart in `slot` (the first element of every
    run), so plotly.js, the longest of the browser's waits, starts loading at once. True when sent. (No
    loading note with it: the block waits for plotly.js before it paints, the note with it.) The first
    run imports plotly itself when the thread's light part has not begun (it waits for this: first_visit),
    so the server's first seconds go to serving Streamlit's JavaScript, not to imports (ws open 1.85 -> 1.55 s);
    while the light part is importing, nothing is sent (the preview sends it once that is done)."""
    try:
        if ready():
            return False
        if _light is None:            # `streamlit run app.py`: no thread yet (the preview may start it)
            return _first_alone(slot)
        locked = not _light.is_set()             # before the light part: import plotly under its lock
        if locked and not _plotly.acquire(blocking=False):  # the light part is importing plotly now
            return False
        try:
            first_chart(slot)
        finally:
            if locked:
                _plotly.release()
        return True
    finally:
        _arrived.set()


def _first_alone(slot) -> bool:
    """No prestart thread yet: the blank chart when no other session is importing (it holds _imports, as
    plotly_early's runs do), so plotly.js loads while the preview waits for the light part it starts next."""
    if not _imports.acquire(blocking=False):
        return False
    try:
        with _plotly:
            first_chart(slot)
        return True
    finally:
        _imports.release()


def first_visit(timeout: float):
    """For prestart's light part: wait until a first run has sent its blank chart (at most `timeout` s), then
    hold the lock under which plotly is first imported (a context manager)."""
    _arrived.wait(timeout)
    return _plotly


def first_chart(slot) -> None:
    with slot.container():
        bundles(code_and_formula=False, key="warmup_plotly_first")


def prestart_or_busy(start: Callable[[], object]) -> bool:
    """True when a prestart thread is at work, started now with `start()` when none was and no session is
    importing in its own run (`streamlit run app.py`); False when one is: take turns as before."""
    if _prestart is not None:
        return True
    if not _imports.acquire(blocking=False):
        return False
    try:
        start()                 # calls prestarting(): sessions that come next wait for the thread
    finally:
        _imports.release()
    return _prestart is not None


def plotly_early(note: str = "") -> Optional[object]:
    """In a process that has not imported torch yet: a placeholder holding `note` (what the visitor reads
    meanwhile) and a blank chart (else None). Call imported() once the heavy imports are done (in a finally)."""
    if ready():
        return None
    _imports.acquire()
    if ready():                             # another session did the imports while this one waited
        _imports.release()
        return None
    try:
        if _light is not None:      # prestart's light part may be importing pandas and plotly (it starts after
            _light.wait(WAIT_S)     # this run's plotly_first): plotly would find them half-made
        slot = _send_blank(note)
        if _prestart is not None:
            _prestart.wait(WAIT_S)  # a class server (serve.py) is importing them already: wait for it
        return slot
    except BaseException:
        _imports.release()
        raise


def ready() -> bool:
    """torch is imported, and no prestart thread (serve.py) is still at work."""
    return "torch" in sys.modules and (_prestart is None or _prestart.is_set())


def imported(slot) -> None:
    """The heavy imports are done: let the next session in."""
    if slot is not None:
        _imports.release()


def _send_blank(note: str):
    slot = st.empty()
    with slot.container():
        if note:
            st.caption(note)                            # what a student reads meanwhile: no error, no blank page
        bundles()
    return slot


def bundles(code_and_formula: bool = True, key: Optional[str] = "warmup_plotly") -> None:
    """A blank chart, code and a formula in 10 hidden pixels: rendered, so the browser starts loading their
    bundles now (plotly.js, the highlighter, KaTeX), not seen. code_and_formula=False: the chart alone (this
    process serves the bundles: 4.7 MB of plotly.js first); key None: no chart."""
    blank = {"data": [{"type": "scatter", "x": [], "y": [], "hoverinfo": "skip"}],
             "layout": {"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}, "xaxis": {"visible": False},
                        "yaxis": {"visible": False}}}
    with st.container(height=10, border=False):
        if key is not None:
            st.plotly_chart(blank, config={"staticPlot": True, "displayModeBar": False}, key=key)
        if code_and_formula:
            st.code(" ", language=None)
            st.latex(r"\,")


def done(slot) -> None:
    if slot is not None:
        slot.empty()
