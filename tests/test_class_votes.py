"""A class's questions in rounds (viz_explorer/classroom/votes.py) on SQLite and on a throwaway PostgreSQL: the two
votes kept apart, results hidden until the teacher shows them, the countdown, the reveal, the teacher's rights, the
report's rows equal to the votes given."""
from __future__ import annotations

import secrets
from collections import Counter

import pytest

from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.server import db

OPTS = ["A", "B", "C", "D"]
Q = "check/concept-checks/scaling-a"


@pytest.fixture
def eng(db_url):    # noqa: F811
    return db.engine(db_url)


def _class(eng, n):
    code, secret = cr.create_class("attention-step-by-step", eng)
    students = [secrets.token_urlsafe(12) for _ in range(n)]
    for i, b in enumerate(students):
        cr.join(code, b, f"n{i}" if i % 2 else "", eng)
    return code, secret, students


def test_two_votes_are_kept_apart_and_hidden_until_shown(eng):
    code, secret, students = _class(eng, 6)
    first = {b: OPTS[i % 3] for i, b in enumerate(students)}
    for b, c in first.items():
        assert cv.answer(code, b, Q, c, OPTS, eng) == 1
    with pytest.raises(cr.ClassError, match="not shown"):
        cv.shown_counts(code, Q, OPTS, eng, round=1)          # a student's page cannot read them yet
    cv.close_round(code, secret, Q, eng)
    with pytest.raises(cr.ClassError, match="closed"):
        cv.answer(code, students[0], Q, "D", OPTS, eng)          # discussion: no vote counts
    assert cv.state(code, Q, eng) == cv.State(1, False, 0, False, None)
    cv.open_round(code, secret, Q, eng, round=2)
    second = {b: "A" for b in students[:4]}                      # four vote again, all for A
    for b, c in second.items():
        assert cv.answer(code, b, Q, c, OPTS, eng) == 2
    with pytest.raises(cr.ClassError, match="not shown"):
        cv.shown_counts(code, Q, OPTS, eng, round=2)
    want1, want2 = Counter(first.values()), Counter(second.values())
    assert cv.counts(code, secret, Q, OPTS, eng, round=1) == {o: want1.get(o, 0) for o in OPTS}
    assert cv.counts(code, secret, Q, OPTS, eng, round=2) == {o: want2.get(o, 0) for o in OPTS}
    assert cv.answered(code, Q, eng, round=1) == 6 and cv.answered(code, Q, eng, round=2) == 4
    assert [cv.my_answer(code, b, Q, eng, round=r) for b in students[4:] for r in (1, 2)] == \
        [first[students[4]], None, first[students[5]], None]
    cv.show(code, secret, Q, eng)
    s = cv.state(code, Q, eng)
    assert (s.round, s.open, s.shown) == (2, False, 2)           # showing closes the vote
    assert cv.shown_counts(code, Q, OPTS, eng, round=1) == cv.counts(code, secret, Q, OPTS, eng, round=1)
    assert cv.shown_counts(code, Q, OPTS, eng, round=2) == {o: want2.get(o, 0) for o in OPTS}


def test_rules_of_the_rounds(eng):
    code, secret, (b,) = _class(eng, 1)                           # a class of one student
    cv.open_round(code, secret, Q, eng, round=2)                 # a second vote before the first closed: it closes it
    with pytest.raises(cr.ClassError, match="cannot go back"):
        cv.open_round(code, secret, Q, eng, round=1)
    for bad in (0, 3, True, "2"):
        with pytest.raises(cr.ClassError, match="round"):
            cv.open_round(code, secret, Q, eng, round=bad)
    for bad in (-1, cv.MAX_SECONDS + 1, True, "10", float("nan")):
        with pytest.raises(cr.ClassError, match="countdown"):
            cv.open_round(code, secret, Q, eng, round=2, seconds=bad)
    for wrong in ("", None, "x" * 24):
        for move in (cv.close_round, cv.show, cv.reveal):
            with pytest.raises(cr.ClassError, match="teacher"):
                move(code, wrong, Q, eng)
        with pytest.raises(cr.ClassError, match="teacher"):
            cv.counts(code, wrong, Q, OPTS, eng)
        with pytest.raises(cr.ClassError, match="teacher"):
            cv.set_focus(code, wrong, Q, eng)
    assert not cv.state(code, Q, eng).peer
    cv.set_peer(code, secret, Q, True, eng)                      # the question's mode: kept through the moves
    cv.close_round(code, secret, Q, eng)
    cv.open_round(code, secret, Q, eng, round=2)
    assert cv.state(code, Q, eng).peer and cv.mine(code, b, Q, eng)[0].peer
    with pytest.raises(cr.ClassError, match="teacher"):
        cv.set_peer(code, "x" * 24, Q, False, eng)
    cv.answer(code, b, Q, "B", OPTS, eng)
    cv.reveal(code, secret, Q, eng)
    assert cv.revealed(code, Q, eng) and cv.state(code, Q, eng).shown == 2
    with pytest.raises(cr.ClassError, match="answer is shown"):
        cv.answer(code, b, Q, "C", OPTS, eng)                    # a vote after the reveal
    with pytest.raises(cr.ClassError, match="answer is shown"):
        cv.open_round(code, secret, Q, eng, round=2)
    assert cv.my_answer(code, b, Q, eng, round=2) == "B"


def test_the_countdown_closes_the_vote_on_time(eng, monkeypatch):
    code, secret, (b, c) = _class(eng, 2)
    now = [1_000_000.0]
    monkeypatch.setattr(cv.time, "time", lambda: now[0])
    s = cv.open_round(code, secret, Q, eng, round=1, seconds=30)
    assert s.deadline == 1_000_030.0 and s.left(now[0]) == 30
    now[0] += 29.5
    cv.answer(code, b, Q, "A", OPTS, eng)
    assert cv.state(code, Q, eng).left(now[0]) == 1
    now[0] += 1
    with pytest.raises(cr.ClassError, match="closed"):
        cv.answer(code, c, Q, "A", OPTS, eng)
    assert cv.state(code, Q, eng).left(now[0]) == 0
    cv.open_round(code, secret, Q, eng, round=1, seconds=0)      # opened again, no countdown
    cv.answer(code, c, Q, "B", OPTS, eng)
    assert cv.counts(code, secret, Q, OPTS, eng) == {"A": 1, "B": 1, "C": 0, "D": 0}


def test_focus_and_the_reports_rows(eng):
    code, secret, students = _class(eng, 3)
    other, other_secret, outsiders = _class(eng, 1)
    assert cv.focus(code, eng) is None
    cv.set_focus(code, secret, Q, eng)
    assert cv.focus(code, eng) == Q and cv.focus(other, eng) is None
    given = []
    for i, b in enumerate(students):
        cv.answer(code, b, Q, OPTS[i], OPTS, eng)
        given.append((i + 1, Q, 1, OPTS[i]))
    cv.answer(other, outsiders[0], Q, "D", OPTS, eng)            # another class's vote stays there
    cv.open_round(code, secret, Q, eng, round=2)
    cv.answer(code, students[2], Q, "A", OPTS, eng)
    given.append((3, Q, 2, "A"))
    assert cv.now(code, eng) == (*cr.lesson_and_step(code, eng), Q)           # one read: the step and the focus
    s, votes = cv.mine(code, students[2], Q, eng)                             # one read: the state and my votes
    assert s == cv.state(code, Q, eng) and votes == {r: cv.my_answer(code, students[2], Q, eng, round=r)
                                                     for r in (1, 2)} == {1: "C", 2: "A"}
    assert cv.mine(code, students[0], Q, eng)[1] == {1: "A"}
    cv.set_focus(code, secret, None, eng)
    assert cv.focus(code, eng) is None and cv.now(code, eng)[2] is None
    rows = cv.class_votes(code, secret, eng)
    assert sorted((r["student"], r["question"], r["round"], r["choice"]) for r in rows) == sorted(given)
    assert [r["nickname"] for r in rows if r["round"] == 1] == ["", "n1", ""]
    assert not any(b in str(rows) for b in students)             # no browser id leaves the store
    with pytest.raises(cr.ClassError, match="teacher"):
        cv.class_votes(code, other_secret, eng)
