"""A student's answer box is redrawn when, and only when, what it shows changes (class_watch.py): the class stamp the
route answers changes exactly when a fresh run of the box draws something else (the reference: the student's page
itself, run again with AppTest), and equals the stamp the drawn box holds while nothing changes, so a watching
phone asks for no run then. The route answers a stranger's code or garbage with the stamp "none", never an error."""
from __future__ import annotations

import asyncio
import json
import secrets

import pytest
from starlette.requests import Request

from app_util import texts
from test_app_class import env, open_class  # noqa: F401  (env: a fixture)
from viz_explorer.classroom import bank, class_routes, class_watch, shared_reads
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv


def ask(code: str, question: str) -> str:
    """The route's answer, as the watcher gets it."""
    query = f"code={code}&q={question}".encode()
    req = Request({"type": "http", "method": "GET", "path": class_routes.PATH, "query_string": query, "headers": []})
    res = asyncio.run(class_routes.class_stamp(req))
    assert res.status_code == 200 and res.headers["cache-control"] == "no-store"
    return json.loads(res.body)["stamp"]


def drawn(at) -> tuple[str, dict, tuple]:
    """(the stamp the box's watcher holds, its data, what the box shows: texts, picks and whether they are
    enabled, charts)."""
    (w,) = [json.loads(e.proto.json) for e in at.get("bidi_component") if e.proto.component_name.endswith("class_watch")]
    shows = (texts(at), tuple((r.key, tuple(r.options), r.disabled) for r in at.radio),
             tuple(b.disabled for b in at.button if b.key == "lc_send"),
             tuple(e.proto.spec for e in at.get("plotly_chart")))
    return w["stamp"], w, shows


@pytest.fixture
def fresh_reads(monkeypatch):
    """Every read fresh when the test moves the clock on (the process shares a read for FRESH seconds)."""
    now = [1000.0]
    monkeypatch.setattr(shared_reads, "clock", lambda: now[0])
    return lambda: now.__setitem__(0, now[0] + 2 * shared_reads.FRESH)


def test_the_stamp_changes_exactly_when_the_box_would_draw_something_else(env, fresh_reads):
    code, secret = cr.create_class("attention-step-by-step", env)
    checks = bank.load_bank("concept-checks")
    q, q2 = checks.half("a")[:2]
    qid = checks.class_id(q)
    me, others = secrets.token_urlsafe(12), [secrets.token_urlsafe(12) for _ in range(3)]
    for b in [me, *others]:
        cr.join(code, b, "", env)
    cv.set_focus(code, secret, qid, env)
    student = open_class({"class": code, "me": me, "lang": "en"})
    events = [
        ("nothing", lambda: None),
        ("another student votes, results hidden", lambda: cv.answer(code, others[0], qid, q.letters[0],
                                                                    list(q.letters), env)),
        ("the teacher closes the vote", lambda: cv.close_round(code, secret, qid, env)),
        ("the teacher shows vote 1", lambda: cv.show(code, secret, qid, env)),
        ("the teacher opens vote 1 again, its results still shown", lambda: cv.open_round(code, secret, qid, env)),
        ("another student votes in the shown vote", lambda: cv.answer(code, others[1], qid, q.letters[1],
                                                                      list(q.letters), env)),
        ("the teacher opens vote 2 with a countdown", lambda: cv.open_round(code, secret, qid, env, round=2,
                                                                            seconds=60)),
        ("the teacher shows vote 2", lambda: cv.show(code, secret, qid, env)),
        ("nothing again", lambda: None),
        ("the teacher reveals the answer", lambda: cv.reveal(code, secret, qid, env)),
        ("the teacher moves to the next question", lambda: cv.set_focus(code, secret, checks.class_id(q2), env)),
    ]
    stamp, data, shows = drawn(student)
    assert ask(code, data["q"]) == stamp                    # nothing changed since the box drew: no rerun asked
    changed = []
    for name, event in events:
        event()
        fresh_reads()
        now = ask(code, data["q"])
        student.run()
        assert not student.exception, name
        stamp2, data2, shows2 = drawn(student)
        assert (now != stamp) == (shows2 != shows), name     # the route says "changed" iff the box draws anew
        assert ask(code, data2["q"]) == stamp2, name          # and once redrawn, the box is current
        changed.append(now != stamp)
        stamp, data, shows = stamp2, data2, shows2
    assert changed == [False, False, True, True, True, True, True, True, False, True, True]


def test_the_box_counts_down_in_the_browser_and_its_run_shows_no_seconds(env, fresh_reads):
    code, secret = cr.create_class("attention-step-by-step", env)
    qid = "attention-step-by-step#1:check-in"
    cv.open_round(code, secret, qid, env, round=1, seconds=30)
    zh = open_class({"class": code, "lang": "zh"})
    _, data, shows = drawn(zh)
    assert data["left"] in (29, 30) and data["one"] == "还剩 1 秒。" and data["other"] == "还剩 {sec} 秒。"
    assert "还剩" not in shows[0]               # the seconds are the browser's: a run's would be stale in a second
    cv.close_round(code, secret, qid, env)
    fresh_reads()
    zh.run()
    assert drawn(zh)[1]["left"] is None


@pytest.mark.parametrize("code, question", [("NOPE2345", "x"), ("", ""), ("<b>", "q"), ("A" * 5000, "q" * 5000)])
def test_the_route_answers_a_stranger_with_none(env, code, question):
    assert ask(code, question) == class_watch.NONE


def test_a_box_that_cannot_read_the_class_keeps_watching(env, fresh_reads, monkeypatch):
    code, secret = cr.create_class("attention-step-by-step", env)
    student = open_class({"class": code, "lang": "en"})

    def down(*a, **kw):
        raise cr.ClassError("unavailable")
    with monkeypatch.context() as m:
        m.setattr(cv, "now", down)
        fresh_reads()
        student.run()
        assert "unavailable" in texts(student).lower() or texts(student)
        stamp, data, _ = drawn(student)
        assert stamp == class_watch.NONE == ask(code, data["q"])     # no rerun asked while the store is down
    fresh_reads()
    assert ask(code, data["q"]) != class_watch.NONE                  # back: the watcher reruns the box
