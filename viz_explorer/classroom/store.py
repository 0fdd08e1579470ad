"""The live classes' store: classes and their students, in the app's database (viz_explorer.server.db); their
questions' rounds and votes are votes.py's, on the same helpers (guarded, need_teacher, check_browser, rate).

    code, secret = create_class("attention-step-by-step")     # the teacher's; only a hash of the secret is kept
    join(code, browser_id, "Mei")                              # a student: a random id per browser, a nickname
    set_step(code, secret, 3); lesson_and_step(code)           # the teacher moves the class; everyone reads it

Every call is one short transaction, so N processes (or machines on one PostgreSQL) see the same class.
Errors a person can cause are ClassError with a one-line message; the page shows it. sqlalchemy and the tables
(tables()) are imported and made on the first call that reads or writes the database:
every page run imports this module (live_class.remember), and only a live class needs them.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
import threading
import time
import unicodedata
from types import SimpleNamespace
from typing import TYPE_CHECKING, Optional

from viz_explorer.server.refusal import Refusal
from viz_explorer.classroom import shared_reads

if TYPE_CHECKING:
    import sqlalchemy as sa

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"   # 32 symbols: no I, O, 0, 1 (read aloud, typed from a board)
CODE_LEN = 8                    # 32**8 = 2**40 codes
BROWSER_ID = re.compile(r"^[A-Za-z0-9_-]{16,43}$")
NICK_MAX = 24                   # characters
CHOICE_MAX, QUESTION_MAX, OPTIONS_MAX = 200, 128, 26
RATE_WINDOW, RATE_MAX = 10, 20  # at most 20 actions (joins, answers) per browser per 10 s window
MAX_STEP = 4096
MESSAGES = {            # ClassError's key -> its one-line English message (the page shows strings' "lc.err.KEY")
    "code": "a class code is {n} letters and digits, e.g. {example}",
    "no_class": "there is no class {code}: check the code with your teacher",
    "teacher": "only the class's teacher can do this (type the teacher key on the teacher's page)",
    "browser": "this browser's id is malformed: reopen the class's join link",
    "rate": "too many answers from this browser: wait {seconds} seconds",
    "choice": "that answer is not one of this question's options",
    "join": "join the class first (open its join link)",
    "lesson": "{lesson} is not a lesson name",
    "step": "a step is 0 … {last}",
    "question": "a question id is 1 … {n} characters",
    "options": "a question has 1 … {n} options of 1 … {chars} characters",
    "revealed": "the answer is shown: this question takes no more answers",
    "closed": "voting on this question is closed",
    "hidden": "the teacher has not shown these results yet",
    "round": "a question has a first vote and a second one after discussion (round 1 or 2); it cannot go back to the first",
    "seconds": "a countdown is 0 … {most} seconds",
    "unavailable": "the class's database cannot be reached now: nothing was saved; try again in a moment",
    "full": "the class's database is full (its disk has no room): nothing was saved; the teacher has been told",
}
FAILURE_WINDOW = 120            # seconds a store failure is shown to the teacher of its class


class ClassError(Refusal):
    """Something a person did that the class refuses: `key` names it (MESSAGES), `kw` fills it in."""
    MESSAGES = MESSAGES


def guarded(fn):
    """The database failing (unreachable, restarting, read-only, its disk full) becomes a ClassError the page shows
    in one line, "unavailable" or "full", never an exception; the failure is counted for the class's teacher."""
    @functools.wraps(fn)
    def call(*args, **kw):
        import sqlalchemy as sa
        from viz_explorer.server import db
        try:
            return db.again_if_dropped(lambda: fn(*args, **kw))
        except (sa.exc.OperationalError, sa.exc.InterfaceError, OSError) as e:
            key = "full" if "full" in str(e).lower() or getattr(e, "errno", None) == 28 else "unavailable"
            code = args[0] if args and isinstance(args[0], str) else ""
            if len(code) == CODE_LEN and all(ch in ALPHABET for ch in code):
                with _lock:
                    _, n, _ = _failures.get(code, ("", 0, 0.0))
                    _failures[code] = (key, n + 1, time.time())
            raise ClassError(key) from e
    return call


def failures(code: str, now: Optional[float] = None) -> Optional[tuple[str, int]]:
    """(why, how many) of the writes for class `code` this process could not save in the last FAILURE_WINDOW
    seconds, or None."""
    got = _failures.get(code)
    if got is None or (time.time() if now is None else now) - got[2] > FAILURE_WINDOW:
        return None
    return got[0], got[1]


_tables: list = []                          # tables(), once made
# class code -> (ClassError key, how many, last time): writes the database refused in this process, for the teacher
_failures: dict[str, tuple[str, int, float]] = {}
_lock = threading.Lock()


def _make_tables() -> SimpleNamespace:
    import sqlalchemy as sa
    from viz_explorer.server import db
    classes = sa.Table(
        "classes", db.METADATA,
        sa.Column("code", sa.String(CODE_LEN), primary_key=True),
        sa.Column("secret_hash", sa.String(64), nullable=False),          # sha256 of the teacher's secret
        sa.Column("lesson", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("created", sa.Float, nullable=False),
    )
    members = sa.Table(
        "class_members", db.METADATA,
        sa.Column("code", sa.String(CODE_LEN), sa.ForeignKey("classes.code"), primary_key=True),
        sa.Column("browser", sa.String(43), primary_key=True),
        sa.Column("nickname", sa.String(NICK_MAX), nullable=False, server_default=""),
        sa.Column("joined", sa.Float, nullable=False),
    )
    hits = sa.Table(                # the rate limit's counters: one row per browser and window
        "class_hits", db.METADATA,
        sa.Column("browser", sa.String(43), primary_key=True),
        sa.Column("window", sa.Integer, primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
    )
    votes = sa.Table(               # votes.py's: one row per student, question and round (its latest choice there)
        "class_votes", db.METADATA,
        sa.Column("code", sa.String(CODE_LEN), primary_key=True),
        sa.Column("browser", sa.String(43), primary_key=True),
        sa.Column("question", sa.String(QUESTION_MAX), primary_key=True),
        sa.Column("round", sa.Integer, primary_key=True),
        sa.Column("choice", sa.String(CHOICE_MAX), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
    )
    asked = sa.Table(               # votes.py's: a question's state (votes.State), once its teacher acted on it
        "class_questions", db.METADATA,
        sa.Column("code", sa.String(CODE_LEN), primary_key=True),
        sa.Column("question", sa.String(QUESTION_MAX), primary_key=True),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("open", sa.Boolean, nullable=False),
        sa.Column("shown", sa.Integer, nullable=False),
        sa.Column("revealed", sa.Boolean, nullable=False),
        sa.Column("deadline", sa.Float, nullable=True),
        sa.Column("peer", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("at", sa.Float, nullable=False),
    )
    focus = sa.Table(               # votes.py's: the bank question a class is on instead of its lesson step's
        "class_focus", db.METADATA,
        sa.Column("code", sa.String(CODE_LEN), primary_key=True),
        sa.Column("question", sa.String(QUESTION_MAX), nullable=False),
    )
    return SimpleNamespace(classes=classes, members=members, hits=hits, votes=votes, asked=asked, focus=focus)


def tables() -> SimpleNamespace:
    """The class tables (classes, members, hits; votes, asked, focus for votes.py) in the app's database's METADATA, made on the
    store's first use with sqlalchemy's import: every page run imports this module (live_class.remember), and only a
    live class reads them, so no other page pays for sqlalchemy."""
    with _lock:
        if not _tables:
            _tables.append(_make_tables())
        return _tables[0]


def sql():
    """(sqlalchemy, tables()), both imported or made on first use."""
    import sqlalchemy as sa
    return sa, tables()


def engine_for(eng: Optional[sa.Engine]) -> sa.Engine:
    """`eng`, else the app's engine, with the class tables made on it."""
    from viz_explorer.server import db
    t = tables()
    return db.ready(eng or db.engine(), [t.classes, t.members, t.hits, t.votes, t.asked, t.focus])


def reader_for(eng: Optional[sa.Engine]) -> sa.Engine:
    """engine_for(eng) for statements that only read (db.reads)."""
    from viz_explorer.server import db
    return db.reads(engine_for(eng))


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))


def normal_code(code) -> str:
    """A typed class code as stored (upper case, spaces and dashes dropped); ClassError if it cannot be one."""
    c = re.sub(r"[\s-]", "", code).upper() if isinstance(code, str) else ""
    if len(c) != CODE_LEN or any(ch not in ALPHABET for ch in c):
        raise ClassError("code", n=CODE_LEN, example=new_code())
    return c


def nickname(text) -> str:
    """A nickname as stored: control and format characters out, spaces collapsed, at most NICK_MAX characters."""
    if not isinstance(text, str):
        return ""
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C")
    return " ".join(text.split())[:NICK_MAX]


@guarded
def create_class(lesson: str, eng: Optional[sa.Engine] = None) -> tuple[str, str]:
    """A new class on `lesson` at step 0: (code, the teacher's secret). The secret is not stored."""
    sa, T = sql()
    if not isinstance(lesson, str) or not re.match(r"^[a-z0-9][a-z0-9_-]{0,63}$", lesson):
        raise ClassError("lesson", lesson=repr(lesson))
    secret = secrets.token_urlsafe(18)
    for _ in range(5):                       # a clash among 2**40 codes is rare; try again if it happens
        code = new_code()
        try:
            with engine_for(eng).begin() as conn:
                conn.execute(T.classes.insert().values(code=code, secret_hash=_hash(secret), lesson=lesson, step=0,
                                                     created=time.time()))
            return code, secret
        except sa.exc.IntegrityError:
            continue
    raise RuntimeError("no free class code after 5 tries")


@guarded
def lesson_and_step(code: str, eng: Optional[sa.Engine] = None) -> tuple[str, int]:
    """(lesson, current step) of a class; ClassError when there is no such class."""
    sa, T = sql()
    code = normal_code(code)
    with reader_for(eng).connect() as conn:
        row = conn.execute(sa.select(T.classes.c.lesson, T.classes.c.step).where(T.classes.c.code == code)).first()
    if row is None:
        raise ClassError("no_class", code=code)
    return row[0], row[1]


@guarded
def is_teacher(code: str, secret, eng: Optional[sa.Engine] = None) -> bool:
    """Whether `secret` is this class's teacher secret (constant-time comparison of the hashes)."""
    sa, T = sql()
    if not isinstance(secret, str) or not secret or len(secret) > 64:
        return False
    with reader_for(eng).connect() as conn:
        row = conn.execute(sa.select(T.classes.c.secret_hash).where(T.classes.c.code == normal_code(code))).first()
    return row is not None and hmac.compare_digest(row[0], _hash(secret))


def need_teacher(code: str, secret, eng) -> str:
    code = normal_code(code)
    if not is_teacher(code, secret, eng):
        raise ClassError("teacher")
    return code


@guarded
def set_step(code: str, secret: str, step: int, eng: Optional[sa.Engine] = None) -> None:
    """The teacher moves the class to `step` (0-based); the students follow."""
    sa, T = sql()
    code = need_teacher(code, secret, eng)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < MAX_STEP:
        raise ClassError("step", last=MAX_STEP - 1)
    with engine_for(eng).begin() as conn:
        conn.execute(T.classes.update().where(T.classes.c.code == code).values(step=step))
    shared_reads.forget(code)


def check_browser(browser) -> str:
    if not isinstance(browser, str) or not BROWSER_ID.match(browser):
        raise ClassError("browser")
    return browser


def rate(conn, browser: str, now: float) -> None:
    """Count one action of `browser` in the database (so the limit holds across processes); refuse past it."""
    from viz_explorer.server import db
    if db.count_hit(conn, tables().hits, browser, now, RATE_WINDOW) > RATE_MAX:
        raise ClassError("rate", seconds=RATE_WINDOW)


@guarded
def join(code: str, browser: str, nick: str = "", eng: Optional[sa.Engine] = None) -> str:
    """A student joins (or renames themself in) a class; returns the nickname as stored."""
    sa, T = sql()
    from viz_explorer.server import db
    code, browser, nick = normal_code(code), check_browser(browser), nickname(nick)
    lesson_and_step(code, eng)
    now = time.time()
    with engine_for(eng).begin() as conn:
        rate(conn, browser, now)
        db.upsert(conn, T.members, ["code", "browser"], {"code": code, "browser": browser, "nickname": nick,
                                                     "joined": now}, ["nickname"])
    return nick


@guarded
def roster(code: str, secret: str, eng: Optional[sa.Engine] = None) -> list[str]:
    """The teacher's list of the nicknames who joined, in joining order ("" for none given)."""
    sa, T = sql()
    code = need_teacher(code, secret, eng)
    with reader_for(eng).connect() as conn:
        return [r[0] for r in conn.execute(sa.select(T.members.c.nickname).where(T.members.c.code == code)
                                           .order_by(T.members.c.joined, T.members.c.browser))]
