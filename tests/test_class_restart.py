"""Nothing lost: students answer through the real server (light websocket clients), the server is killed
(SIGKILL) in the middle of the class, a new one starts on the same database, and the teacher's page
shows every answer given before; on SQLite and on PostgreSQL."""
from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from pathlib import Path

import pytest

from class_util import open_student, open_teacher, send, teacher_view
from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.server import db

ROOT = Path(__file__).resolve().parent.parent
from stclient import Server

pytestmark = pytest.mark.browser      # a real server (tests/conftest.py makes it slow too)
OPTS = ["got_it", "unsure", "lost"]


def test_answers_survive_a_killed_server(db_url, ckpt_root, tmp_path):     # noqa: F811
    eng = db.engine(db_url)
    code, secret = cr.create_class("attention-step-by-step", eng)
    picks = {secrets.token_urlsafe(12): OPTS[i % 3] for i in range(3)}        # step 1: one of each
    picks2 = dict(zip(picks, ["lost", "lost", "got_it"]))                       # step 2

    async def before_kill(url):
        students = {me: await open_student(url, code, me) for me in picks}
        for me, s in students.items():
            res = await send(s, picks[me])
            assert not res.exceptions and len(res.fragments) == 1, res.exceptions     # the box alone reran
            assert any("Your answer" in e.alert.body for e in res.of("alert")), "no confirmation shown"
        t, res = await open_teacher(url, code, secret)
        assert teacher_view(res) == ([picks_count(picks, o) for o in OPTS], "3 of 3")
        await t.click("lc_next")                                 # the class moves to step 2
        for me, s in students.items():
            await s.rerun(fragment=next(iter(s.fragment_of.values())))     # the box looks again (its timer)
            if me != list(picks)[-1]:                                        # one student is still thinking
                await send(s, picks2[me])
        return students

    log = tmp_path / "server.log"
    env = {"VIZ_DATABASE_URL": db_url}
    first = Server(ROOT, ckpt_root, log=log, env=env).__enter__()
    try:
        asyncio.run(before_kill(first.url))
    finally:
        first.proc.kill()                                        # mid-class, no shutdown
        first.proc.wait(timeout=20)
    with Server(ROOT, ckpt_root, log=tmp_path / "server2.log", env=env) as second:
        async def after(url):
            _, res = await open_teacher(url, code, secret)
            return teacher_view(res), res
        (ys, answered), res = asyncio.run(after(second.url))
    assert not res.exceptions, res.exceptions
    done2 = {me: c for me, c in list(picks2.items())[:-1]}
    assert ys == [picks_count(done2, o) for o in OPTS] and answered == "2 of 3"
    # and the store agrees for both steps (the question ids the page uses are lesson#step:check-in)
    assert cv.counts(code, secret, "attention-step-by-step#1:check-in", OPTS, eng) == {
        o: picks_count(picks, o) for o in OPTS}
    assert cr.lesson_and_step(code, eng) == ("attention-step-by-step", 1)


def picks_count(picks: dict, option: str) -> int:
    return Counter(picks.values())[option]
