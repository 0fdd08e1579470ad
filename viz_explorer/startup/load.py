"""The app's start-up: torch, the app's modules and the default model loaded, and its first example run, in one
background thread, with one readiness signal.

Both `streamlit run app.py` and `streamlit run serve.py` serve an st.App whose lifespan starts it with the
process, so the model loads while the browser loads Streamlit's JavaScript; under AppTest the first page run
starts it. Page runs wait for it (app.py shows a loading note meanwhile, and a blank chart so the browser
loads plotly.js). Whatever fails in the thread is logged and left to the page run, which meets it again and
shows it.

The thread shares one GIL with the server, which meanwhile serves the browser Streamlit's ~140 JavaScript files,
so two settings hold while it runs (benchmarks/cold_start.py; docs/benchmarks.md, "Cold start"):
- the GIL's switch interval is 1 ms instead of 5: the server's event loop and file threads give the GIL up at
  each read or write and then wait up to a switch interval for this thread to hand it back (the convoy effect:
  the browser waits on single files while the load imports);
- Python's cyclic garbage collector is off: the ~280k objects the imports make (torch most of them) set off
  hundreds of collections, some of them full, all on the first page's path. What is alive at the end is
  frozen out of the collector's reach for good (gc.freeze: the one freeze; viz_explorer/server/memory.py's
  collections after page runs then never traverse it), with the ~7k objects of cyclic garbage the imports leave (under 1 MiB), so the first page run's
  collection stays short too.
"""
from __future__ import annotations

import gc
import importlib
import sys
import threading
import time
from contextlib import asynccontextmanager

from streamlit.logger import get_logger

from viz_explorer.server import defaults

log = get_logger("viz_transformer.startup")     # Streamlit's format and level (logger.level in config.toml)
_ready = threading.Event()                      # the one signal: set when the load has finished or failed
_started = threading.Lock()                     # taken once, by the first start()
SWITCH_S = 0.001                                # the GIL's switch interval while loading (Python's default: 5 ms)


def load() -> None:
    """The imports app.py makes, then the default checkpoint loaded and its first example run, into the same
    caches the sidebar reads (viz_explorer.server.cached)."""
    t0 = time.perf_counter()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_S)             # both process-wide; back in `finally`, however the load ends
    gc.disable()
    try:
        _import_light()
        from viz_explorer.server import cached, memory  # noqa: F401  (torch)
        from viz_explorer.kit import context, registry, session_guard, sidebar  # noqa: F401
        from viz_explorer.lessons import lesson_mode, links  # noqa: F401
        from viz_explorer.classroom import live_class  # noqa: F401
        from viz_transformer import list_roots
        # the sidebar's pick over every root (the shipped default first, wherever it is; a root may be one model)
        good = [i for i in list_roots(defaults.checkpoint_roots()) if i.error is None]
        info = next((i for i in good if i.name == defaults.CHECKPOINT), good[0] if good else None)
        if info is not None:
            stamp = cached.folder_stamp(info.path)
            hm = cached.load_model(str(info.path), stamp)
            cached.run_text(str(info.path), stamp, defaults.EXAMPLES[defaults.kind(hm.cfg)][0])
        log.info("ready in %.2f s", time.perf_counter() - t0)
    except Exception:  # noqa: BLE001 - the page run meets the same problem and shows it
        log.exception("the start-up load failed; the first page run loads what it needs itself")
    finally:
        gc.freeze()
        gc.enable()
        sys.setswitchinterval(switch)
        _ready.set()


LIGHT = ("numpy", "pandas", "plotly.io", "plotly.tools")   # what streamlit's plotly_chart needs


def _import_light() -> None:
    """The modules a chart needs, whole, in this order, by the thread and by blank_chart(): the second waits for
    the first module by module (plotly looks numpy and pandas up in sys.modules: in two orders, two threads
    could each find the other's half-made)."""
    for name in LIGHT:
        importlib.import_module(name)


def blank_chart() -> None:
    """A blank 10-pixel chart for a page run waiting for the load: the browser fetches and compiles plotly.js
    (4.7 MB) meanwhile instead of after the load (benchmarks/cold_start.py measures the page drawn)."""
    import streamlit as st
    _import_light()
    blank = {"data": [{"type": "scatter", "x": [], "y": [], "hoverinfo": "skip"}],
             "layout": {"height": 10, "margin": {"l": 0, "r": 0, "t": 0, "b": 0}, "xaxis": {"visible": False},
                        "yaxis": {"visible": False}}}
    st.plotly_chart(blank, config={"staticPlot": True, "displayModeBar": False}, key="startup_blank")


def start() -> None:
    """Start load() in a daemon thread, once per process."""
    if _started.acquire(blocking=False):
        threading.Thread(target=load, name="viz-startup", daemon=True).start()


def ready() -> bool:
    return _ready.is_set()


def wait() -> None:
    """Start the load if nobody has, and return when it is over."""
    start()
    _ready.wait()


@asynccontextmanager
async def lifespan(app):
    """st.App's lifespan (serve.py): start the load and yield at once, so the server answers meanwhile."""
    start()
    yield
