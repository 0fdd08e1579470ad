"""A student's answer box redraws when the class changes, not on a timer.

The box reads the class, draws it, and mounts a watcher (class_watch.js) that holds a stamp of what it read. The
watcher asks the server for the class's current stamp every EVERY seconds (`GET class-stamp?code=…&q=…`, one small
request answered from the process's shared reads: no script run, no page sent) and reruns the box when the two differ
or when the box's countdown ends; meanwhile it counts the countdown down each second in the browser. The stamp covers
what the box shows that anyone in the class may know: the lesson step or bank question the class is on, the question's
state (round, open, shown, revealed, countdown, mode) and the counts of the rounds the teacher has shown. A student's
own vote redraws the box through its Send button.

The box's stamp is computed from reads made before it draws, so a change while it draws makes the stamps differ and
the box draw again; never the reverse (a box that looks current and is not).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv

EVERY = 3.0                  # s between two asks: a move is seen within EVERY, FRESH (a move made in another
                             # process) and one run of the box: the goal is 4 s
FRESH = 0.25                 # s one read of the stamp serves the process's other asks (shared_reads)
PATH = "class-stamp"         # the route, relative to the page's address (class_routes.py)
NONE = "none"                # the stamp of a class or question that does not exist (the box then says why)


def seen(code: str, question: str, fresh: float = FRESH) -> tuple:
    """What a box shows of the question that anyone in the class may know: its state and the counts of its shown
    rounds. ClassError as the store's reads."""
    s = cv.state(code, question, fresh=fresh)
    shown = tuple(tuple(cv.shown_counts(code, question, None, round=r, fresh=fresh).items())
                  for r in range(1, s.shown + 1))
    return s, shown


def stamp(where: tuple, what: tuple) -> str:
    """A short fingerprint of (lesson, step, focus) and seen()'s value."""
    return hashlib.blake2b(repr((tuple(where), what)).encode(), digest_size=8).hexdigest()


def current(code: str, question: str) -> str:
    """The class's stamp now, for a box showing `question` (NONE when the class or question is not there, or the
    store cannot be read: the box, rerun, says which)."""
    try:
        return stamp(cv.now(code, fresh=FRESH), seen(code, question))
    except cr.ClassError:
        return NONE


def _js() -> str:
    return (Path(__file__).with_name("class_watch.js")).read_text(encoding="utf-8")


_mount = None


def watch(code: str, question: str, drawn: str, left: Optional[int], counting: tuple[str, str]) -> None:
    """Mount the box's watcher: `drawn` is the stamp of what the box drew; `left` the countdown's whole seconds
    (None without one); `counting` its line for one second and for {sec} seconds, in the page's language."""
    import streamlit as st
    global _mount
    if _mount is None:
        _mount = st.components.v2.component("class_watch", html='<span class="left"></span>', js=_js(),
                                            css=".left{font-size:0.875rem;opacity:0.7}")
    _mount(data={"url": PATH, "code": code, "q": question, "stamp": drawn, "every": EVERY, "left": left,
                 "one": counting[0], "other": counting[1]},
           key="lc_watch", on_changed_change=lambda: None, height="content")
