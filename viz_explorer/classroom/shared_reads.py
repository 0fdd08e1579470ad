"""Reads that every student's box makes every few seconds and that are the same for the whole class (which step or
bank question it is on, a question's state, the counts the teacher has shown), made once for all the boxes of one
process every FRESH seconds: 200 phones poll about 67 times a second, while these answers change only when the
teacher acts.

A teacher's move made in this process is seen by the next read (forget, called by every move of the store); one
made in another process behind the same nginx is seen within FRESH seconds. A student's own votes are never shared,
and a vote is always checked against the store, not against a shared read.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

FRESH = 0.5                   # s: well under a box's 3 s poll and the 4 s a class has to follow the teacher
MAX_KEYS = 4096               # kept reads; past it all are dropped (each is a few bytes; a class has a few dozen)

T = TypeVar("T")
_got: dict[tuple, tuple[float, object]] = {}        # (engine, what, class code, ...) -> (when read, value)
_moves: dict[str, int] = {}                         # class code -> how many moves this process has made in it
_lock = threading.Lock()


clock: Callable[[], float] = time.monotonic


def read(key: tuple, fetch: Callable[[], T], fresh: float = FRESH) -> T:
    """fetch()'s value, shared with every caller of the same key for `fresh` seconds (0: always fetched). key[2]
    is the class's code (forget). A fetch that raises is not kept."""
    now = clock()
    got = _got.get(key)
    if got is not None and 0 <= now - got[0] < fresh:
        return got[1]
    before = _moves.get(key[2], 0)
    value = fetch()
    with _lock:
        if _moves.get(key[2], 0) == before:          # no move since the fetch began: the value is not older
            if len(_got) >= MAX_KEYS:
                _got.clear()
            _got[key] = (now, value)
    return value


def forget(code: str) -> None:
    """Drop the class's shared reads: its teacher has just changed it (a read under way is not kept either)."""
    with _lock:
        for key in [k for k in _got if k[2] == code]:
            del _got[key]
        if len(_moves) >= MAX_KEYS:
            _moves.clear()
        _moves[code] = _moves.get(code, 0) + 1
