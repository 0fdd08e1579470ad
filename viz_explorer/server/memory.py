"""The server process's memory between page runs: the garbage a page run leaves is collected soon.

A page script runs in a fresh namespace; a function it defines (a callback, a lambda) refers back to that
namespace, so when the run ends the namespace, with every tensor and figure it held, is a reference cycle
that only a full garbage collection frees. Streamlit's collection after every run is off
(.streamlit/config.toml, runner.postScriptGC: it cost 30% of the CPU under load), and Python's own full
collections come rarely in a process of ~400k objects. So after each page run: a full collection at most
every MIN_INTERVAL seconds, cheap because everything alive at the end of start-up (the imported libraries,
the default model: viz_explorer/startup/load.py) is frozen out of the collector's reach, and the freed pages
handed back to the system. Nothing is frozen later: a visitor's session objects stay collectable.
A run that ends too soon after the last collection schedules one for when the interval is up, so the
garbage of a server's last runs before it goes quiet is not kept until someone comes back (it held up to
~90 MiB of one 512-piece text's page).
"""
from __future__ import annotations

import gc
import threading
import time
from typing import Optional

from viz_explorer.server import allocator

MIN_INTERVAL = 2.0          # seconds between two full collections, whatever the number of sessions

_lock = threading.Lock()
_timer_lock = threading.Lock()
_state = {"last": 0.0, "collections": 0, "seconds": 0.0}
_pending: Optional[threading.Timer] = None       # the scheduled collection, if any


def after_run() -> None:
    """Collect the cycles left by page runs now, or, within MIN_INTERVAL of the last collection, once it
    is up (one pending collection at a time, on a daemon timer thread)."""
    wait = MIN_INTERVAL - (time.monotonic() - _state["last"])
    if wait > 0:
        _schedule(wait)
    else:
        collect()


def _schedule(wait: float) -> None:
    global _pending
    with _timer_lock:
        if _pending is not None:
            return                          # the pending collection runs after this run ended: it covers it
        _pending = threading.Timer(wait, _pending_collect)
        _pending.daemon = True
        _pending.start()


def _pending_collect() -> None:
    global _pending
    with _timer_lock:
        _pending = None
    collect()


def collect() -> None:
    """One full collection and the freed pages handed back (while another thread collects: one more later)."""
    if not _lock.acquire(blocking=False):
        _schedule(MIN_INTERVAL)             # the collection under way may have begun before this garbage was made
        return
    try:
        t0 = time.monotonic()
        gc.collect()
        allocator.release_free_memory()
        _state["last"] = time.monotonic()
        _state["collections"] += 1
        _state["seconds"] += _state["last"] - t0
    finally:
        _lock.release()


def stats() -> dict:
    """Collections made so far and the seconds they took."""
    return dict(_state)
