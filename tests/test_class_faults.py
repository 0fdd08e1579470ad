"""Faults a class survives (viz_explorer/classroom/store.py): PostgreSQL restarted mid-class (an answer sent during
the outage is refused with a message, not lost in silence, and the next one is saved), the SQLite file's disk full (a
one-line message to the student, a warning on the teacher's page), and a read-only database."""
from __future__ import annotations

import secrets
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
from streamlit.testing.v1 import AppTest

from app_util import APP, page_file
from conftest import skip_or_fail
from db_util import new_database, pg_bindir, postgres_server
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.kit.strings import EN, fill
from viz_explorer.server import db

OPTS = ["got_it", "unsure", "lost"]
Q = "attention-step-by-step#1:check-in"


@contextmanager
def _class_on_postgres(students: int):
    """(cluster, engine, code, secret, the students' browser ids): a class on a PostgreSQL started for the test,
    every student joined; the app's engines disposed afterwards."""
    if pg_bindir() is None:
        skip_or_fail("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    with postgres_server() as cluster:
        eng = db.engine(new_database(cluster.url))
        code, secret = cr.create_class("attention-step-by-step", eng)
        me = [secrets.token_urlsafe(12) for _ in range(students)]
        for m in me:
            cr.join(code, m, "", eng)
        try:
            yield cluster, eng, code, secret, me
        finally:
            db.dispose()


def test_postgres_restarted_mid_class():
    with _class_on_postgres(3) as (cluster, eng, code, secret, me):
        cv.answer(code, me[0], Q, "lost", OPTS, eng)                    # before
        cluster.stop()
        with pytest.raises(cr.ClassError) as refused:                  # during: refused, said in one line
            cv.answer(code, me[1], Q, "unsure", OPTS, eng)
        assert refused.value.key == "unavailable" and "nothing was saved" in str(refused.value)
        assert cr.failures(code) == ("unavailable", 1)
        with pytest.raises(cr.ClassError):
            cv.counts(code, secret, Q, OPTS, eng)                      # the teacher's chart: a message too
        cluster.start()
        cv.answer(code, me[1], Q, "unsure", OPTS, eng)                 # after: sent again, saved
        cv.answer(code, me[2], Q, "got_it", OPTS, eng)
        assert cv.counts(code, secret, Q, OPTS, eng) == {"got_it": 1, "unsure": 1, "lost": 1}


def test_a_restart_nobody_saw_costs_no_answer():
    """PostgreSQL restarted between two answers: the pool's connections are dead, nothing has found out yet; the next
    answer and the next read fail on them once, inside the store, and succeed on a fresh connection."""
    with _class_on_postgres(2) as (cluster, eng, code, secret, me):
        cv.answer(code, me[0], Q, "lost", OPTS, eng)
        assert cv.mine(code, me[0], Q, eng)[1] == {1: "lost"}           # a read's pooled connection, too
        cluster.stop()
        cluster.start()
        cv.answer(code, me[1], Q, "unsure", OPTS, eng)
        assert cv.mine(code, me[1], Q, eng)[1] == {1: "unsure"}
        assert cv.counts(code, secret, Q, OPTS, eng) == {"got_it": 0, "unsure": 1, "lost": 1}
        assert cr.failures(code) is None


def test_a_read_leaves_no_transaction_open():
    """db.reads: on PostgreSQL a read runs outside a transaction (one round trip; nothing to roll back when the
    connection goes back to the pool), a write still in one; psycopg's own transaction status says which."""
    if pg_bindir() is None:
        skip_or_fail("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    from psycopg.pq import TransactionStatus
    with postgres_server() as cluster:
        eng = db.engine(new_database(cluster.url))
        for engine, status in ((db.reads(eng), TransactionStatus.IDLE), (eng, TransactionStatus.INTRANS)):
            with engine.connect() as conn:
                assert conn.execute(sa.text("SELECT 1")).scalar_one() == 1
                assert conn.connection.dbapi_connection.info.transaction_status == status
        assert db.reads(db.reads(eng)) is db.reads(eng)
        db.dispose()


def _full_at(eng: sa.Engine, pages: int) -> None:
    """Every new connection of `eng` may grow the SQLite file to `pages` pages: SQLITE_FULL past it, as a full disk."""
    sa.event.listen(eng, "connect", lambda conn, _: conn.execute(f"PRAGMA max_page_count={pages}"))


def test_a_full_disk_is_said_to_the_student_and_the_teacher(ckpt_root, tmp_path, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    monkeypatch.setenv("VIZ_DATA", str(tmp_path))
    db.dispose()
    eng = db.engine()
    code, secret = cr.create_class("attention-step-by-step", eng)
    students = [secrets.token_urlsafe(30) for _ in range(600)]
    for m in students[:2]:
        cr.join(code, m, "", eng)
    with eng.connect() as conn:
        used = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
    db.dispose()
    eng = db.engine()
    _full_at(eng, used)                                               # not one page more
    key = None
    for m in students[2:]:                                            # joins grow the file until it cannot
        try:
            cr.join(code, m, "x" * 24, eng)
        except cr.ClassError as e:
            key = e.key
            break
    assert key == "full" and cr.failures(code)[0] == "full"
    assert EN["lc.err.full"].startswith("The class's database is full")
    at = AppTest.from_file(APP, default_timeout=90)                   # the teacher's page, same process
    at.session_state["ckpt"] = "tiny-zh-en"
    at.session_state["lc_teach"] = (code, secret)
    at.run()
    at.switch_page(page_file("live_class"))
    at.query_params["teach"] = code
    at.run()
    assert not at.exception
    n = cr.failures(code)[1]
    assert fill(EN["lc.failed.full"], n=n, seconds=cr.FAILURE_WINDOW) in [w.value for w in at.warning]
    db.dispose()


def test_a_read_only_database_refuses_in_one_line(tmp_path):
    path = tmp_path / "viz.sqlite3"
    eng = db.engine(f"sqlite:///{path}")
    code, _ = cr.create_class("attention-step-by-step", eng)
    db.dispose()
    ro = sa.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    with pytest.raises(cr.ClassError) as refused:
        cr.join(code, secrets.token_urlsafe(12), "", ro)
    assert refused.value.key == "unavailable"
    assert cr.lesson_and_step(code, ro) == ("attention-step-by-step", 0)      # reading still works
    ro.dispose()
