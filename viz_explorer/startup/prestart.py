"""A fresh class server gets ready before its first visitor: torch, the app's modules and the default model
are loaded, and the default text run, in a thread started by st.App's lifespan (serve.py), which yields at
once so the server answers meanwhile. Under `streamlit run app.py` the first visit to the Overview starts it
(viz_explorer/startup/preview.py).

The thread imports the light part first (numpy, pandas, plotly and its first figure, the modules of the
Overview's model-free part, the default checkpoint's config and tokenizer: `light()`), so that a first visitor
sees that much of the Overview at once (viz_explorer/startup/preview.py), then the heavy part (`done()`). On two cores
each waits for the browser: the light part for the first run to have sent its blank chart (at most ARRIVE_S:
the server's first second goes to serving Streamlit's JavaScript), the heavy part for that first page to be
sent (`visited()`; at most HOLD_S after the light part when nobody comes) and, when it was the preview, drawn
(`seen()`, at most SEEN_S). benchmarks/cold_start.py measures both (numbers: README, "A fresh server").
No page run imports beside this thread (two threads importing numpy, pandas and plotly at once can each find
the other's modules half-made; see viz_explorer/startup/warmup.py): the preview uses only what the light part
imported, and any other first run sends its blank chart, so the browser loads plotly.js in parallel, then
waits until the thread is done. Whatever fails in the thread is logged and left to the page run, which
meets it again and shows it as it always does.
"""
from __future__ import annotations

import threading
import time
from contextlib import asynccontextmanager
from typing import Optional

from streamlit.logger import get_logger

from viz_explorer.server import defaults
from viz_explorer.startup import warmup

log = get_logger("viz_transformer.prestart")      # Streamlit's format and level (logger.level in config.toml)
_light = threading.Event()         # set when the light part is imported (and _sketch made, or None)
_sketch = None                     # viz_explorer.startup.preview.Sketch of the default checkpoint, or None
_visitor = threading.Event()       # a first page run is past the preview (drawn it, or will wait for the model)
HOLD_S = 2.0                       # the most the heavy part waits for that (see warm)
_seen = threading.Event()          # a browser that was sent the preview has drawn it (or there is none to draw)
SEEN_S = 3.0                       # the most the heavy part waits for that after the preview was sent
ARRIVE_S = 2.0                     # the most the light part waits for a first run to import plotly (warm_light)
_done = threading.Event()
_thread: Optional[threading.Thread] = None
timings: dict = {}                 # light_s, imports_s, model_s, run_s: seconds since the thread started;
                                   # started_at_s, light_at_s, ready_at_s: since the process started (log, benchmarks)


def warm_light() -> None:
    """What the preview needs, imported whole before anything else is: the modules plotly looks up in
    sys.modules, plotly's own lazily loaded parts (its first figure and JSON), the Overview's light part, and
    the default checkpoint's sketch."""
    with warmup.first_visit(ARRIVE_S):
        _import_light()


def _import_light() -> None:
    global _sketch
    t0 = time.perf_counter()
    try:
        import numpy, pandas  # noqa: F401,E401  (plotly checks for them in sys.modules: never half-made)
        import plotly.io, plotly.tools  # noqa: F401,E401  (streamlit's plotly_chart imports them)
        from viz_explorer.startup import preview
        from viz_transformer.plots import diagram
        made = preview.sketch()
        if made is not None:
            plotly.io.to_json(diagram.architecture_diagram(made.cfg, made.src_len, made.tgt_len), validate=False)
        _sketch = made
        timings["light_s"] = time.perf_counter() - t0
        timings["light_at_s"] = _since_process_start()
    except Exception:  # noqa: BLE001 - no preview then; the page run loads as before
        log.exception("prestart's light part failed; no preview of the Overview")
    finally:
        _light.set()


def light(timeout: float):
    """The default checkpoint's preview.Sketch once the light part is imported; None when it is not within
    `timeout` seconds or there is none."""
    return _sketch if _light.wait(timeout) else None


def visited(preview: bool = False) -> None:
    """A page run has sent the preview (`preview`), or has no preview to send: the heavy part may start once
    that browser has drawn it (seen())."""
    if not preview:
        _seen.set()
    _visitor.set()


def seen() -> None:
    """The browser the preview was sent to is drawing again after it (its poll came back): plotly.js is
    compiled and the diagram drawn, so the heavy part no longer competes with them for the two cores."""
    _seen.set()


def done() -> bool:
    """The thread has finished (the model is loaded, or it failed and the page run will say why)."""
    return _done.is_set()


def warm() -> None:
    """The heavy imports app.py makes, then the default checkpoint loaded and its first example run
    (into the same caches the sidebar reads: viz_explorer.server.cached), after the light part (warm_light)."""
    timings["started_at_s"] = _since_process_start()
    warm_light()
    # The heavy imports hold the GIL for seconds: a first visitor's preview (and Streamlit's JS, which this
    # process serves) would wait for it. So they wait for that page to be sent, at most HOLD_S (no visitor).
    # The browser then compiles 4.7 MB of plotly.js and draws the diagram: the heavy imports beside that
    # took 0.4-0.8 s more to the preview drawn, so they also wait until it is (at most SEEN_S).
    after = "no visitor"
    if _visitor.wait(HOLD_S):
        after = "the preview drawn" if _seen.wait(SEEN_S) else "the preview sent (not seen drawn)"
    timings["heavy_at_s"] = _since_process_start()
    log.info("heavy part starts after %s", after)
    t0 = time.perf_counter()
    try:
        from viz_explorer.server import cached, memory  # noqa: F401  (torch)
        from viz_explorer.kit import context, registry, session_guard, sidebar
        from viz_explorer.lessons import lesson_mode, links
        from viz_explorer.classroom import live_class  # noqa: F401
        timings["imports_s"] = time.perf_counter() - t0
        from viz_transformer import list_checkpoints
        good = [i for i in list_checkpoints(defaults.checkpoints_root()) if i.error is None]
        info = next((i for i in good if i.name == defaults.CHECKPOINT), good[0] if good else None)   # the sidebar's
        if info is not None:
            stamp = cached.folder_stamp(info.path)
            hm = cached.load_model(str(info.path), stamp)
            timings["model_s"] = time.perf_counter() - t0
            kind = "translator" if hm.cfg.is_translator else "lm"
            cached.run_text(str(info.path), stamp, defaults.EXAMPLES[kind][0])
            timings["run_s"] = time.perf_counter() - t0
        timings["ready_at_s"] = _since_process_start()
        log.info("ready in %.2f s (%s)", time.perf_counter() - t0,
                 ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    except Exception:  # noqa: BLE001 - the page run meets the same problem and shows it
        log.exception("prestart failed; the first page run loads what it needs itself")
    finally:
        _done.set()


def _since_process_start() -> float:
    """Seconds since this process started (Linux: /proc; elsewhere 0)."""
    try:
        import os
        ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])     # starttime, in clock ticks
        boot_s = float(open("/proc/uptime").read().split()[0])
        return boot_s - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def start() -> threading.Thread:
    """Start warm() in a daemon thread (once per process); the first page runs wait for it
    (viz_explorer.startup.warmup)."""
    global _thread
    if _thread is None:
        warmup.prestarting(_done, _light)
        _thread = threading.Thread(target=warm, name="viz-prestart", daemon=True)
        _thread.start()
    return _thread


@asynccontextmanager
async def lifespan(app):
    """st.App's lifespan: start the thread and yield at once (the server answers while it works)."""
    start()
    yield {"prestart": timings}
