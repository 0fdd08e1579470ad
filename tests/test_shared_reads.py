"""Class-wide reads shared by a process's student boxes (viz_explorer/classroom/shared_reads.py), on SQLite and on a
throwaway PostgreSQL: a teacher's move made in this process is seen by the very next read; a change made elsewhere
(another process: here a write that bypasses this process's store functions) is seen once FRESH seconds have
passed and not before; a student's own votes and the hidden-results gate are never served from a shared read."""
from __future__ import annotations

import secrets
import threading

import pytest

from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from viz_explorer.classroom import shared_reads
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.server import db

OPTS = ["A", "B", "C", "D"]
Q = "check/concept-checks/scaling-a"
F = shared_reads.FRESH


@pytest.fixture
def eng(db_url):    # noqa: F811
    return db.engine(db_url)


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(shared_reads, "clock", lambda: now[0])
    return now


def _elsewhere(eng, code, step):
    """Another process moves the class: the database changes, this process's shared reads are not told."""
    T = cr.tables()
    with eng.begin() as conn:
        conn.execute(T.classes.update().where(T.classes.c.code == code).values(step=step))


def test_a_move_in_this_process_is_seen_at_once_and_one_elsewhere_within_fresh(eng, clock):
    code, secret = cr.create_class("attention-step-by-step", eng)
    assert cv.now(code, eng, fresh=F)[1] == 0
    cr.set_step(code, secret, 2, eng)                   # the teacher, in this process
    assert cv.now(code, eng, fresh=F)[1] == 2
    cv.set_focus(code, secret, Q, eng)
    assert cv.now(code, eng, fresh=F)[2] == Q
    _elsewhere(eng, code, 5)
    assert cr.lesson_and_step(code, eng)[1] == 5         # the store has it
    assert cv.now(code, eng, fresh=F)[1] == 2            # a box in this process: the shared read, still fresh
    clock[0] += F * 0.9
    assert cv.now(code, eng, fresh=F)[1] == 2
    clock[0] += F * 0.2
    assert cv.now(code, eng, fresh=F)[1] == 5            # FRESH seconds after it was read, it is read again


def test_a_question_state_is_shared_but_votes_are_each_students_own(eng, clock):
    code, secret = cr.create_class("attention-step-by-step", eng)
    a, b = (secrets.token_urlsafe(12) for _ in range(2))
    for x in (a, b):
        cr.join(code, x, "", eng)
    cv.set_peer(code, secret, Q, True, eng)
    assert cv.mine(code, a, Q, eng, fresh=F) == (cv.state(code, Q, eng), {})
    cv.answer(code, a, Q, "B", OPTS, eng)
    assert cv.mine(code, a, Q, eng, fresh=F)[1] == {1: "B"}         # at once: one's own vote is never shared
    assert cv.mine(code, b, Q, eng, fresh=F)[1] == {}
    cv.close_round(code, secret, Q, eng)
    assert cv.mine(code, b, Q, eng, fresh=F)[0].open is False       # the teacher's move, seen at once
    cv.open_round(code, secret, Q, eng, round=2)
    s, votes = cv.mine(code, b, Q, eng, fresh=F)
    assert (s.round, s.open, votes) == (2, True, {})


def test_hidden_results_are_never_shared_and_shown_ones_are(eng, clock):
    code, secret = cr.create_class("attention-step-by-step", eng)
    who = [secrets.token_urlsafe(12) for _ in range(3)]
    for i, x in enumerate(who):
        cr.join(code, x, "", eng)
        cv.answer(code, x, Q, OPTS[i % 2], OPTS, eng)
    for _ in range(2):                                   # refused every time, never kept
        with pytest.raises(cr.ClassError, match="not shown"):
            cv.shown_counts(code, Q, OPTS, eng, round=1, fresh=F)
    cv.show(code, secret, Q, eng)
    want = cv.counts(code, secret, Q, OPTS, eng, round=1)
    assert cv.shown_counts(code, Q, OPTS, eng, round=1, fresh=F) == want == {"A": 2, "B": 1, "C": 0, "D": 0}


def test_a_read_under_way_when_the_teacher_moves_is_not_kept(eng, clock):
    code, secret = cr.create_class("attention-step-by-step", eng)
    started, go_on = threading.Event(), threading.Event()
    got = []

    def slow():                                          # a box's read that began before the move
        started.set()
        go_on.wait(10)
        return ("attention-step-by-step", 0, None)
    box = threading.Thread(target=lambda: got.append(shared_reads.read((eng, "now", code), slow)))
    box.start()
    started.wait(10)
    cr.set_step(code, secret, 3, eng)                   # the teacher moves while it is under way
    go_on.set()
    box.join(10)
    assert got == [("attention-step-by-step", 0, None)]  # that box shows what it read ...
    assert cv.now(code, eng, fresh=F)[1] == 3            # ... but the next box reads the move


def test_a_failed_read_is_not_kept_and_the_keys_stay_bounded(monkeypatch, clock):
    calls = []

    def broken():
        calls.append(1)
        raise cr.ClassError("unavailable")
    for _ in range(2):
        with pytest.raises(cr.ClassError):
            shared_reads.read((None, "now", "ZZZZ2345"), broken)
    assert len(calls) == 2
    monkeypatch.setattr(shared_reads, "MAX_KEYS", 8)
    fetched = []

    def fetch(i):
        fetched.append(i)
        return i
    for i in range(20):
        assert shared_reads.read((None, "now", f"C{i}"), lambda: fetch(i)) == i
    assert shared_reads.read((None, "now", "C19"), lambda: fetch(-1)) == 19      # the newest is kept ...
    assert shared_reads.read((None, "now", "C0"), lambda: fetch(0)) == 0
    assert fetched == list(range(20)) + [0]                                       # ... the oldest was let go
