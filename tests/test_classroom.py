"""The live class's store (viz_explorer/classroom/store.py) on SQLite and on a throwaway PostgreSQL: codes, the
teacher's secret, answers validated and counted, nicknames, the per-browser rate limit, classes kept apart."""
from __future__ import annotations

import secrets
import threading
from collections import Counter

import pytest
import sqlalchemy as sa

from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.server import db

OPTS = ["A", "B", "C"]


def browser() -> str:
    return secrets.token_urlsafe(12)


@pytest.fixture
def eng(db_url):    # noqa: F811
    return db.engine(db_url)


def test_codes_are_long_random_and_the_secret_is_not_stored(eng):
    made = [cr.create_class("lesson-a", eng) for _ in range(40)]
    codes = [c for c, _ in made]
    assert len(set(codes)) == 40
    assert all(len(c) == 8 and set(c) <= set(cr.ALPHABET) for c in codes)
    assert len(set(cr.ALPHABET)) == 32 and not set("IO01") & set(cr.ALPHABET)
    with eng.connect() as conn:
        stored = " ".join(str(v) for row in conn.execute(sa.select(cr.tables().classes)) for v in row)
    assert not any(s in stored for _, s in made)                 # only hashes of the secrets
    code, s = made[0]
    assert cr.is_teacher(code, s, eng) and not cr.is_teacher(code, made[1][1], eng)
    assert cr.normal_code(code.lower()[:4] + "-" + code.lower()[4:]) == code     # typed loosely


def test_teacher_actions_need_the_secret(eng):
    code, s = cr.create_class("lesson-a", eng)
    other, s2 = cr.create_class("lesson-b", eng)
    for wrong in ("", "x" * 24, s2, s[:-1], None):
        with pytest.raises(cr.ClassError, match="teacher"):
            cr.set_step(code, wrong, 3, eng)
        with pytest.raises(cr.ClassError, match="teacher"):
            cv.counts(code, wrong, "q", OPTS, eng)
        with pytest.raises(cr.ClassError, match="teacher"):
            cr.roster(code, wrong, eng)
    assert cr.lesson_and_step(code, eng) == ("lesson-a", 0)
    cr.set_step(code, s, 3, eng)
    assert cr.lesson_and_step(code, eng) == ("lesson-a", 3)
    assert cr.lesson_and_step(other, eng) == ("lesson-b", 0)
    with pytest.raises(cr.ClassError, match="no class"):
        cr.lesson_and_step(cr.new_code(), eng)
    with pytest.raises(cr.ClassError, match="class code"):
        cr.lesson_and_step("'; DROP TABLE classes; --", eng)


def test_answers_are_validated_and_counted_one_per_student(eng):
    code, s = cr.create_class("lesson-a", eng)
    students = [browser() for _ in range(7)]
    for b in students:
        cr.join(code, b, "", eng)
    latest = {}
    for i, b in enumerate(students):                  # each answers, some change their minds
        for choice in OPTS[i % 3:][: 1 + i % 2]:
            cv.answer(code, b, "q1", choice, OPTS, eng)
            latest[b] = choice
    cv.answer(code, students[0], "q2", "C", OPTS, eng)           # another question is counted apart
    want = Counter(latest.values())
    assert cv.counts(code, s, "q1", OPTS, eng) == {o: want.get(o, 0) for o in OPTS}
    assert cv.counts(code, s, "q2", OPTS, eng) == {"A": 0, "B": 0, "C": 1}
    assert cv.my_answer(code, students[1], "q1", eng) == latest[students[1]]
    for bad in ("D", "", "a", None, "A " * 2):
        with pytest.raises(cr.ClassError, match="not one of"):
            cv.answer(code, students[0], "q1", bad, OPTS, eng)
    with pytest.raises(cr.ClassError, match="join"):
        cv.answer(code, browser(), "q1", "A", OPTS, eng)          # never joined
    with pytest.raises(cr.ClassError, match="malformed"):
        cv.answer(code, "short", "q1", "A", OPTS, eng)
    assert sum(cv.counts(code, s, "q1", OPTS, eng).values()) == len(students)


def test_nicknames_are_cut_and_kept_as_plain_text(eng):
    code, s = cr.create_class("lesson-a", eng)
    long = "李" * 40
    assert cr.join(code, browser(), long, eng) == "李" * cr.NICK_MAX
    html = "<img src=x onerror=alert(1)>"
    assert cr.join(code, browser(), html, eng) == html[:cr.NICK_MAX]   # stored as typed; shown as text only
    assert cr.join(code, browser(), "a\u202e\x00b\n  c", eng) == "ab c"  # control/format characters out
    assert cr.roster(code, s, eng) == ["李" * cr.NICK_MAX, html[:cr.NICK_MAX], "ab c"]


def test_a_rename_changes_the_nickname_only(eng):
    """join() again renames the student: the row's other columns stay, so the roster keeps the joining order."""
    code, s = cr.create_class("lesson-a", eng)
    first, second = browser(), browser()
    cr.join(code, first, "Ann", eng)
    cr.join(code, second, "Bo", eng)
    assert cr.join(code, first, "Cy", eng) == "Cy"
    assert cr.roster(code, s, eng) == ["Cy", "Bo"]
    with eng.connect() as conn:
        m = cr.tables().members
        assert conn.execute(sa.select(sa.func.count()).select_from(m).where(m.c.code == code)).scalar_one() == 2


def test_rate_limit_per_browser_across_processes(db_url):     # noqa: F811
    eng = db.engine(db_url)
    second = sa.create_engine(db_url)           # another process's engine on the same database
    code, _ = cr.create_class("lesson-a", eng)
    flood, calm = browser(), browser()
    cr.join(code, flood, "", eng)
    cr.join(code, calm, "", eng)
    done = 1
    with pytest.raises(cr.ClassError, match="too many"):
        for i in range(cr.RATE_MAX * 2):
            cv.answer(code, flood, "q", OPTS[i % 3], OPTS, eng if i % 2 else second)
            done += 1
    # the window may have turned once mid-way (a fresh count): never more than two windows' worth
    assert cr.RATE_MAX <= done <= 2 * cr.RATE_MAX
    cv.answer(code, calm, "q", "A", OPTS, second)            # another browser is not held back
    second.dispose()


def test_a_student_cannot_reach_another_class(eng):
    a, sa_ = cr.create_class("lesson-a", eng)
    b, sb = cr.create_class("lesson-a", eng)
    me = browser()
    cr.join(a, me, "Mei", eng)
    cv.answer(a, me, "q", "A", OPTS, eng)
    with pytest.raises(cr.ClassError, match="join"):
        cv.answer(b, me, "q", "B", OPTS, eng)                     # joined a, not b
    with pytest.raises(cr.ClassError, match="teacher"):
        cv.counts(b, sa_, "q", OPTS, eng)                         # a's secret opens nothing of b
    assert cv.counts(b, sb, "q", OPTS, eng) == {"A": 0, "B": 0, "C": 0}
    assert cr.roster(b, sb, eng) == []
    assert cv.my_answer(a, browser(), "q", eng) is None           # another browser sees no answer of mine


def test_sixty_students_at_once_are_all_recorded(eng):
    code, s = cr.create_class("lesson-a", eng)
    students = [browser() for _ in range(60)]
    picks = {b: OPTS[i % 3] for i, b in enumerate(students)}
    errors = []

    def one(b):
        try:
            cr.join(code, b, b[:5], eng)
            cv.answer(code, b, "q", picks[b], OPTS, eng)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)
    threads = [threading.Thread(target=one, args=(b,)) for b in students]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert cv.counts(code, s, "q", OPTS, eng) == dict(Counter(picks.values()))
