"""A question's votes on the class pages (the store is votes.py): the teacher's buttons (a countdown, close the
vote, vote again after discussion, show the results, reveal the answer), the teacher's results (hidden until shown
in a peer-instruction question; both votes side by side with who moved), and a student's box for the round that is
open (its countdown ticks in the browser: class_watch.py) and, once shown, the results.

The teacher picks per question "one vote" (the results the teacher sees grow as votes arrive; students see them once
shown) or "vote, discuss, vote again" (the results hidden from everyone, the teacher's projected page included, until
the teacher shows them); the choice is the question's, in the store, so every tab of the teacher agrees.
"""
from __future__ import annotations

import functools
import time
from typing import Optional

import streamlit as st

from viz_explorer.classroom import gain, shared_reads
from viz_explorer.classroom import votes as cv
from viz_explorer.classroom.refusals import say
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.plots import question_figures

MODES = ("one", "peer")


def _do(action, *args, **kw) -> None:
    """A teacher's button: the store's move, a refusal said in one line."""
    try:
        action(*args, **kw)
    except cv.ClassError as e:
        st.error(say(e))


def controls(code: str, secret: str, q) -> None:
    """The teacher's buttons for the question `q` (live_class.Question): outside the chart's fragment, so a press
    reruns the page once."""
    s = cv.state(code, q.id)
    key = f"lc_mode_{q.id}"
    st.session_state[key] = "peer" if s.peer else "one"          # the store's, whichever tab of the teacher set it
    st.segmented_control(t("pi.mode"), MODES, required=True, key=key, format_func=lambda m: t(f"pi.mode.{m}"),
                         on_change=lambda: _do(cv.set_peer, code, secret, q.id, st.session_state[key] == "peer"))
    peer = s.peer
    c1, c2, c3, c4, c5 = st.columns([1.1, 1.4, 1.4, 1.4, 1.4], vertical_alignment="bottom")
    secs = c1.number_input(t("pi.seconds"), min_value=0, max_value=cv.MAX_SECONDS, value=60, step=10, key="lc_secs",
                           help=t("pi.seconds_help"))
    if c2.button(t("pi.start", n=s.round), key="lc_open", icon=":material/timer:", disabled=s.revealed):
        _do(cv.open_round, code, secret, q.id, round=s.round, seconds=int(secs or 0))
        st.rerun()
    if c3.button(t("pi.close"), key="lc_close", icon=":material/block:", disabled=not s.open or s.revealed):
        _do(cv.close_round, code, secret, q.id)
        st.rerun()
    if peer and c4.button(t("pi.again"), key="lc_again", icon=":material/forum:", disabled=s.round != 1 or s.revealed):
        _do(cv.open_round, code, secret, q.id, round=2, seconds=int(secs or 0))
        st.rerun()
    if c5.button(t("pi.show"), key="lc_show", icon=":material/bar_chart:", disabled=s.shown >= s.round):
        _do(cv.show, code, secret, q.id)
        st.rerun()


def status(s: cv.State, now: float, countdown: bool = True) -> str:
    """The question's state in one line for every page: which vote, open or closed, the countdown (left out with
    countdown=False: a student's box counts it down in the browser, class_watch.js)."""
    if s.revealed:
        return t("pi.state.revealed")
    left = s.left(now) if countdown else None
    if s.taking(now):
        return t("pi.state.open", n=s.round) + ("" if left is None else " " + t("pi.state.left", sec=left))
    return t("pi.state.closed", n=s.round) + (" " + t("pi.state.discuss") if s.round == 1 else "")


def _labels(q) -> list[str]:
    """The x labels of a results chart: the option's letter for long options (listed in the prompt's box), else
    the option itself."""
    return list(q.letters) if q.letters else list(q.labels)


def results_figure(q, first: dict, second: Optional[dict], title: str, reveal: bool):
    """Vote 1 alone, or both votes side by side; the right option marked once revealed. The same figure object for
    the same counts and words (never changed after: Streamlit draws a copy): every phone of a class shows it, and
    building one costs more than the rest of a student's box."""
    right = q.options.index(q.answer) if reveal and q.answer in q.options else None
    return _figure(tuple(_labels(q)), tuple(first.get(o, 0) for o in q.options),
                   None if second is None else tuple(second.get(o, 0) for o in q.options),
                   title, (t("pi.vote1"), t("pi.vote2")), right, t("pi.students"))


@functools.lru_cache(maxsize=256)
def _figure(xs: tuple, first: tuple, second: Optional[tuple], title: str, names: tuple, right: Optional[int],
            ylabel: str):
    if second is None:
        return question_figures.answer_counts(list(xs), list(first), title, ylabel=ylabel)
    return question_figures.two_votes(list(xs), list(first), list(second), title, list(names), right, ylabel=ylabel)


def teacher_results(code: str, secret: str, q, s: cv.State, title: str) -> None:
    """The teacher's chart: in "one vote" mode the counts as they come; in a peer-instruction question nothing but
    a note until the results are shown (the page is projected); once a second vote is shown, both votes and who
    moved."""
    if s.peer and s.shown < s.round and not s.revealed:
        st.info(t("pi.hidden"), icon=":material/visibility_off:")
        return
    opts = list(q.options)
    first = cv.counts(code, secret, q.id, opts, round=1)
    second = cv.counts(code, secret, q.id, opts, round=2) if s.round == 2 and (s.shown >= 2 or s.revealed
                                                                             or not s.peer) else None
    widgets.show(results_figure(q, first, second, title, s.revealed), key="lc_chart", html=False)
    if second is not None and q.answer is not None:
        m = gain.moves([v for v in cv.class_votes(code, secret) if v["question"] == q.id], q.id, q.answer)
        st.caption(t("pi.moved", right=m.to_right, wrong=m.to_wrong, n=m.n))


def student_results(code: str, q, s: cv.State) -> None:
    """The results a student sees: those the teacher has shown, nothing else."""
    if s.shown < 1:
        return
    opts = list(q.options)
    first = cv.shown_counts(code, q.id, opts, round=1, fresh=shared_reads.FRESH)
    second = cv.shown_counts(code, q.id, opts, round=2, fresh=shared_reads.FRESH) if s.shown >= 2 else None
    widgets.show(results_figure(q, first, second, t("pi.class_results"), s.revealed), key="lc_shown", html=False)


def student_vote(code: str, me: str, q, s: cv.State, votes: dict[int, str], send, watch) -> Optional[str]:
    """A student's box for the round that is open: the pick (disabled when the round takes no votes) and Send;
    returns their vote in the current round (None if none). votes: theirs so far by round (votes.mine); watch():
    mounts the box's watcher, whose countdown line goes under the round's state."""
    now = time.time()
    st.caption(status(s, now, countdown=False))
    watch()
    label = dict(zip(q.options, q.labels))
    taking = s.taking(now)
    key = f"lc_pick_{q.id}" + ("" if s.round == 1 else "@2")             # a fresh pick for the second vote
    pick = st.radio(t("lc.your_pick"), q.options, index=None, key=key, label_visibility="collapsed",
                    format_func=lambda o: widgets.md_escape(label.get(o, o)), disabled=not taking)  # a label may be *
    if st.button(t("lc.send"), key="lc_send", type="primary", icon=":material/send:", disabled=not taking):
        if (went := send(code, me, q, pick)) is not None:
            votes = {**votes, went: pick}
    if s.round == 2 and votes.get(1) is not None:
        st.caption(t("pi.your_first", choice=widgets.md_escape(label.get(votes[1], votes[1]))))
    return votes.get(s.round)
