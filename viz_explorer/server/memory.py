"""The server process's memory between page runs: the garbage a page run leaves is collected soon.

A page script runs in a fresh namespace; a function it defines (a callback, a lambda) refers back to that
namespace, so when the run ends the namespace, with every tensor and figure it held, is a reference cycle
that only a full garbage collection frees. Streamlit's collection after every run is off
(.streamlit/config.toml, runner.postScriptGC: it cost 30% of the CPU under load), and Python's own full
collections come rarely in a process of ~400k objects. So after each page run: a full collection at most
every MIN_INTERVAL seconds, cheap because everything alive at the end of start-up (the imported libraries,
the default model: viz_explorer/startup/load.py) is frozen out of the collector's reach, and the freed pages
handed back to the system. Nothing is frozen later: a visitor's session objects stay collectable.
A collection holds the interpreter lock from start to end, so it is never made at the end of the run itself
(the visitor would wait for it before the page is finished) nor, while the server is otherwise quiet, inside
another run: it is made on a timer QUIET seconds after a run ends, and put off while one page run is under way
(a visitor's next click), up to BUSY seconds after the last collection. With two or more under way the server
is busy: putting it off would stall some run all the same and only let garbage pile up, so it is made then. The
garbage of a server's last runs before it goes quiet is so collected too, not kept until someone comes back (it
held up to ~90 MiB of one 512-piece text's page).
"""
from __future__ import annotations

import gc
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

from viz_explorer.server import allocator

MIN_INTERVAL = 2.0          # seconds between two full collections, whatever the number of sessions
QUIET = 0.3                 # seconds after a run ends: its last messages are sent before the lock is taken
BUSY = 3.0                  # seconds after the last collection past which one is made even inside a run

_lock = threading.Lock()
_timer_lock = threading.Lock()
_state = {"last": 0.0, "collections": 0, "seconds": 0.0}
_pending: Optional[threading.Timer] = None       # the scheduled collection, if any
_running = [0]                                   # page runs under way


@contextmanager
def page_run() -> Iterator[None]:
    """Around one page run: while it alone is under way a due collection waits (up to BUSY); when it ends, one is
    scheduled (after_run)."""
    with _timer_lock:
        _running[0] += 1
    try:
        yield
    finally:
        with _timer_lock:
            _running[0] -= 1
        after_run()


def after_run() -> None:
    """Schedule the collection of the cycles page runs left: QUIET seconds from now, or when MIN_INTERVAL
    from the last collection is up if that is later (one pending collection at a time, on a daemon timer
    thread)."""
    _schedule(max(QUIET, MIN_INTERVAL - (time.monotonic() - _state["last"])))


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
        put_off = _running[0] == 1 and time.monotonic() - _state["last"] < BUSY
    if put_off:                             # one page run is under way: the collection would stall it
        _schedule(QUIET)
    else:
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
