"""The live classes' store: classes, their students and answers, in the app's database (viz_explorer.server.db).

    code, secret = create_class("attention-step-by-step")     # the teacher's; only a hash of the secret is kept
    join(code, browser_id, "Mei")                              # a student: a random id per browser, a nickname
    answer(code, browser_id, "q1", "B", ["A", "B", "C"])       # validated, one answer per student and question
    counts(code, secret, "q1")                                 # {"A": 0, "B": 1, "C": 0} for the teacher only
    reveal(code, secret, "q1"); revealed(code, "q1")           # the answer shown to all: no more answers to q1

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
    "unavailable": "the class's database cannot be reached now: nothing was saved; try again in a moment",
    "full": "the class's database is full (its disk has no room): nothing was saved; the teacher has been told",
}
FAILURE_WINDOW = 120            # seconds a store failure is shown to the teacher of its class


class ClassError(Refusal):
    """Something a person did that the class refuses: `key` names it (MESSAGES), `kw` fills it in."""
    MESSAGES = MESSAGES


def _guarded(fn):
    """The database failing (unreachable, restarting, read-only, its disk full) becomes a ClassError the page shows
    in one line, "unavailable" or "full", never an exception; the failure is counted for the class's teacher."""
    @functools.wraps(fn)
    def call(*args, **kw):
        import sqlalchemy as sa
        try:
            return fn(*args, **kw)
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
    answers = sa.Table(
        "class_answers", db.METADATA,
        sa.Column("code", sa.String(CODE_LEN), primary_key=True),
        sa.Column("browser", sa.String(43), primary_key=True),
        sa.Column("question", sa.String(QUESTION_MAX), primary_key=True),
        sa.Column("choice", sa.String(CHOICE_MAX), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
    )
    reveals = sa.Table(             # the questions whose answer the teacher has shown the class
        "class_reveals", db.METADATA,
        sa.Column("code", sa.String(CODE_LEN), primary_key=True),
        sa.Column("question", sa.String(QUESTION_MAX), primary_key=True),
        sa.Column("at", sa.Float, nullable=False),
    )
    hits = sa.Table(                # the rate limit's counters: one row per browser and window
        "class_hits", db.METADATA,
        sa.Column("browser", sa.String(43), primary_key=True),
        sa.Column("window", sa.Integer, primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
    )
    return SimpleNamespace(classes=classes, members=members, answers=answers, reveals=reveals, hits=hits)


def tables() -> SimpleNamespace:
    """The class tables (classes, members, answers, reveals, hits) in the app's database's METADATA, made on the
    store's first use with sqlalchemy's import: every page run imports this module (live_class.remember), and only a
    live class reads them, so no other page pays for sqlalchemy."""
    with _lock:
        if not _tables:
            _tables.append(_make_tables())
        return _tables[0]


def _sql():
    """(sqlalchemy, tables()), both imported or made on first use."""
    import sqlalchemy as sa
    return sa, tables()


def _eng(eng: Optional[sa.Engine]) -> sa.Engine:
    """`eng`, else the app's engine, with the class tables made on it."""
    from viz_explorer.server import db
    t = tables()
    return db.ready(eng or db.engine(), [t.classes, t.members, t.answers, t.reveals, t.hits])


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


@_guarded
def create_class(lesson: str, eng: Optional[sa.Engine] = None) -> tuple[str, str]:
    """A new class on `lesson` at step 0: (code, the teacher's secret). The secret is not stored."""
    sa, T = _sql()
    if not isinstance(lesson, str) or not re.match(r"^[a-z0-9][a-z0-9_-]{0,63}$", lesson):
        raise ClassError("lesson", lesson=repr(lesson))
    secret = secrets.token_urlsafe(18)
    for _ in range(5):                       # a clash among 2**40 codes is rare; try again if it happens
        code = new_code()
        try:
            with _eng(eng).begin() as conn:
                conn.execute(T.classes.insert().values(code=code, secret_hash=_hash(secret), lesson=lesson, step=0,
                                                     created=time.time()))
            return code, secret
        except sa.exc.IntegrityError:
            continue
    raise RuntimeError("no free class code after 5 tries")


@_guarded
def lesson_and_step(code: str, eng: Optional[sa.Engine] = None) -> tuple[str, int]:
    """(lesson, current step) of a class; ClassError when there is no such class."""
    sa, T = _sql()
    code = normal_code(code)
    with _eng(eng).connect() as conn:
        row = conn.execute(sa.select(T.classes.c.lesson, T.classes.c.step).where(T.classes.c.code == code)).first()
    if row is None:
        raise ClassError("no_class", code=code)
    return row[0], row[1]


@_guarded
def is_teacher(code: str, secret, eng: Optional[sa.Engine] = None) -> bool:
    """Whether `secret` is this class's teacher secret (constant-time comparison of the hashes)."""
    sa, T = _sql()
    if not isinstance(secret, str) or not secret or len(secret) > 64:
        return False
    with _eng(eng).connect() as conn:
        row = conn.execute(sa.select(T.classes.c.secret_hash).where(T.classes.c.code == normal_code(code))).first()
    return row is not None and hmac.compare_digest(row[0], _hash(secret))


def _need_teacher(code: str, secret, eng) -> str:
    code = normal_code(code)
    if not is_teacher(code, secret, eng):
        raise ClassError("teacher")
    return code


@_guarded
def set_step(code: str, secret: str, step: int, eng: Optional[sa.Engine] = None) -> None:
    """The teacher moves the class to `step` (0-based); the students follow."""
    sa, T = _sql()
    code = _need_teacher(code, secret, eng)
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < MAX_STEP:
        raise ClassError("step", last=MAX_STEP - 1)
    with _eng(eng).begin() as conn:
        conn.execute(T.classes.update().where(T.classes.c.code == code).values(step=step))


def _check_browser(browser) -> str:
    if not isinstance(browser, str) or not BROWSER_ID.match(browser):
        raise ClassError("browser")
    return browser


def _rate(conn, browser: str, now: float) -> None:
    """Count one action of `browser` in the database (so the limit holds across processes); refuse past it."""
    from viz_explorer.server import db
    if db.count_hit(conn, tables().hits, browser, now, RATE_WINDOW) > RATE_MAX:
        raise ClassError("rate", seconds=RATE_WINDOW)


@_guarded
def join(code: str, browser: str, nick: str = "", eng: Optional[sa.Engine] = None) -> str:
    """A student joins (or renames themself in) a class; returns the nickname as stored."""
    sa, T = _sql()
    from viz_explorer.server import db
    code, browser, nick = normal_code(code), _check_browser(browser), nickname(nick)
    lesson_and_step(code, eng)
    now = time.time()
    with _eng(eng).begin() as conn:
        _rate(conn, browser, now)
        db.upsert(conn, T.members, ["code", "browser"], {"code": code, "browser": browser, "nickname": nick,
                                                     "joined": now}, {"nickname": nick})
    return nick


@_guarded
def answer(code: str, browser: str, question: str, choice: str, options: list[str],
           eng: Optional[sa.Engine] = None) -> None:
    """Record a student's answer to `question` (their latest one counts). The choice must be one of the
    question's options; the student must have joined; the browser's rate limit applies."""
    sa, T = _sql()
    from viz_explorer.server import db
    code, browser, question = normal_code(code), _check_browser(browser), _check_question(question)
    if (not isinstance(options, (list, tuple)) or not 0 < len(options) <= OPTIONS_MAX
            or not all(isinstance(o, str) and 0 < len(o) <= CHOICE_MAX for o in options)):
        raise ClassError("options", n=OPTIONS_MAX, chars=CHOICE_MAX)
    if not isinstance(choice, str) or choice not in options:
        raise ClassError("choice")
    now = time.time()
    with _eng(eng).begin() as conn:
        if conn.execute(sa.select(T.members.c.browser).where(T.members.c.code == code,
                                                           T.members.c.browser == browser)).first() is None:
            raise ClassError("join")
        if conn.execute(sa.select(T.reveals.c.code).where(T.reveals.c.code == code,
                                                        T.reveals.c.question == question)).first() is not None:
            raise ClassError("revealed")
        _rate(conn, browser, now)
        db.upsert(conn, T.answers, ["code", "browser", "question"],
                {"code": code, "browser": browser, "question": question, "choice": choice, "at": now},
                {"choice": choice, "at": now})


def _check_question(question) -> str:
    if not isinstance(question, str) or not 0 < len(question) <= QUESTION_MAX:
        raise ClassError("question", n=QUESTION_MAX)
    return question


@_guarded
def reveal(code: str, secret: str, question: str, eng: Optional[sa.Engine] = None) -> None:
    """The teacher shows the class the answer to `question`; from then on it takes no more answers."""
    sa, T = _sql()
    from viz_explorer.server import db
    code, question = _need_teacher(code, secret, eng), _check_question(question)
    with _eng(eng).begin() as conn:
        db.upsert(conn, T.reveals, ["code", "question"], {"code": code, "question": question, "at": time.time()},
                {"question": question})


@_guarded
def revealed(code: str, question: str, eng: Optional[sa.Engine] = None) -> bool:
    """Whether the teacher has shown the answer to `question` (anyone in the class may know this)."""
    sa, T = _sql()
    code, question = normal_code(code), _check_question(question)
    with _eng(eng).connect() as conn:
        return conn.execute(sa.select(T.reveals.c.code).where(T.reveals.c.code == code,
                                                            T.reveals.c.question == question)).first() is not None


@_guarded
def my_answer(code: str, browser: str, question: str, eng: Optional[sa.Engine] = None) -> Optional[str]:
    """This browser's own answer to `question` in this class, None if it has not answered."""
    sa, T = _sql()
    code, browser = normal_code(code), _check_browser(browser)
    with _eng(eng).connect() as conn:
        return conn.execute(sa.select(T.answers.c.choice).where(
            T.answers.c.code == code, T.answers.c.browser == browser, T.answers.c.question == question)).scalar()


@_guarded
def counts(code: str, secret: str, question: str, options: list[str],
           eng: Optional[sa.Engine] = None) -> dict[str, int]:
    """The teacher's view of a question: option -> how many students chose it (every option listed)."""
    sa, T = _sql()
    code = _need_teacher(code, secret, eng)
    with _eng(eng).connect() as conn:
        rows = conn.execute(sa.select(T.answers.c.choice, sa.func.count()).where(
            T.answers.c.code == code, T.answers.c.question == question).group_by(T.answers.c.choice)).all()
    got = dict(rows)
    return {o: int(got.get(o, 0)) for o in options}


@_guarded
def roster(code: str, secret: str, eng: Optional[sa.Engine] = None) -> list[str]:
    """The teacher's list of the nicknames who joined, in joining order ("" for none given)."""
    sa, T = _sql()
    code = _need_teacher(code, secret, eng)
    with _eng(eng).connect() as conn:
        return [r[0] for r in conn.execute(sa.select(T.members.c.nickname).where(T.members.c.code == code)
                                           .order_by(T.members.c.joined, T.members.c.browser))]
