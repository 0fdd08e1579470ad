"""A class's questions: votes in rounds, results hidden until the teacher shows them, the answer revealed, a
countdown, and which bank question the class is on. The classes and students are store.py's.

Peer instruction (Mazur): the class votes alone (round 1) and sees nothing; the teacher closes the vote, the students
discuss with a neighbour, the teacher opens a second vote (round 2), then shows the results and reveals the answer.
A question asked once is round 1 only. The state of one question in one class:

    round 1, open  --close-->  round 1, closed  --again-->  round 2, open  --close-->  round 2, closed
    any state --show--> the current round closed, its results (and the earlier round's) shown to every page
    any state --reveal--> closed, every round shown, the answer shown; no more votes

Votes are kept per round (a student's latest choice in a round counts), so the two rounds never mix. A countdown
is a deadline kept with the state: a vote after it is refused as closed, on every process alike.

    open_round(code, secret, q, round=1, seconds=60); answer(code, browser, q, "B", ["A", "B", "C"])
    counts(code, secret, q, ["A", "B", "C"], round=1)   # the teacher's; shown_counts(code, q, opts, round=1) once shown
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from viz_explorer.classroom.store import (CHOICE_MAX, OPTIONS_MAX, QUESTION_MAX, ClassError, check_browser, engine_for,
                                          guarded, need_teacher, normal_code, rate, reader_for, sql)
from viz_explorer.classroom.store import tables
from viz_explorer.classroom import shared_reads

if TYPE_CHECKING:
    import sqlalchemy as sa

MAX_SECONDS = 600           # the longest countdown


@dataclass(frozen=True)
class State:
    """One question's state in one class (no row yet: round 1, open, nothing shown)."""
    round: int = 1
    open: bool = True
    shown: int = 0                   # the rounds whose results every page shows: 0, 1 or 2
    revealed: bool = False
    deadline: Optional[float] = None     # time.time() after which the open round takes no vote
    peer: bool = False               # "vote, discuss, vote again": results hidden from every page until shown

    def taking(self, now: float) -> bool:
        """Whether a vote sent at `now` counts."""
        return self.open and not self.revealed and (self.deadline is None or now <= self.deadline)

    def left(self, now: float) -> Optional[int]:
        """Whole seconds of the countdown left (0 once past), None without one or when the round is not taking votes."""
        if self.deadline is None or not self.open or self.revealed:
            return None
        return max(0, int(self.deadline - now + 0.999))


def _question(question) -> str:
    if not isinstance(question, str) or not 0 < len(question) <= QUESTION_MAX:
        raise ClassError("question", n=QUESTION_MAX)
    return question


def _read(conn, code: str, question: str) -> State:
    sa, _ = sql()
    from viz_explorer.server import db
    a = tables().asked
    stmt = db.prepared(("votes.state",), lambda: sa.select(*_STATE(a)).where(a.c.code == sa.bindparam("code"),
                                                                          a.c.question == sa.bindparam("question")))
    return _state(conn.execute(stmt, {"code": code, "question": question}).first())


def _STATE(a) -> tuple:
    """The columns of a question's state, in State's order."""
    return a.c.round, a.c.open, a.c.shown, a.c.revealed, a.c.deadline, a.c.peer


def _state(row) -> State:
    """A State from _STATE's columns (a row of Nones, or none: the state of a question not yet acted on)."""
    if row is None or row[0] is None:
        return State()
    return State(int(row[0]), bool(row[1]), int(row[2]), bool(row[3]), row[4], bool(row[5]))


def _write(conn, code: str, question: str, s: State) -> None:
    from viz_explorer.server import db
    values = {"round": s.round, "open": s.open, "shown": s.shown, "revealed": s.revealed, "deadline": s.deadline,
              "peer": s.peer, "at": time.time()}
    db.upsert(conn, tables().asked, ["code", "question"], {"code": code, "question": question, **values}, list(values))


@guarded
def state(code: str, question: str, eng: Optional[sa.Engine] = None, *, fresh: float = 0.0) -> State:
    """The question's state (anyone in the class may know it; fresh: seconds one read serves the process's other
    callers, shared_reads)."""
    code, question, engine = normal_code(code), _question(question), reader_for(eng)

    def fetch():
        with engine.connect() as conn:
            return _read(conn, code, question)
    return shared_reads.read((engine, "state", code, question), fetch, fresh)


def _teacher_moves(code, secret, question, eng, move) -> State:
    """Apply move(State) -> State for the class's teacher, in one transaction; the new state."""
    code, question = need_teacher(code, secret, eng), _question(question)
    with engine_for(eng).begin() as conn:
        new = move(_read(conn, code, question))
        _write(conn, code, question, new)
    shared_reads.forget(code)
    return new


def _countdown(seconds) -> Optional[float]:
    if seconds is None or seconds == 0:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_SECONDS:
        raise ClassError("seconds", most=MAX_SECONDS)
    return time.time() + float(seconds)


@guarded
def open_round(code: str, secret: str, question: str, eng: Optional[sa.Engine] = None, *, round: int = 1,
               seconds: Optional[float] = None) -> State:
    """The teacher opens round 1 (again: its countdown restarts) or round 2 (the vote after discussion, which
    closes round 1 for good), with a countdown of `seconds` (None or 0: none). Refused once revealed, and for
    round 1 once round 2 has begun."""
    if round not in (1, 2) or isinstance(round, bool):
        raise ClassError("round")
    deadline = _countdown(seconds)

    def move(s: State) -> State:
        if s.revealed:
            raise ClassError("revealed")
        if round < s.round:
            raise ClassError("round")
        return State(round, True, min(s.shown, round - 1) if round > s.round else s.shown, False, deadline, s.peer)
    return _teacher_moves(code, secret, question, eng, move)


@guarded
def close_round(code: str, secret: str, question: str, eng: Optional[sa.Engine] = None) -> State:
    """The teacher stops the vote (the class discusses); nothing is shown."""
    return _teacher_moves(code, secret, question, eng,
                          lambda s: dataclasses.replace(s, open=False))


@guarded
def show(code: str, secret: str, question: str, eng: Optional[sa.Engine] = None) -> State:
    """The teacher shows every page the results so far (the current round closes first: a histogram seen while
    voting steers the vote)."""
    return _teacher_moves(code, secret, question, eng, lambda s: dataclasses.replace(s, open=False, shown=s.round))


@guarded
def reveal(code: str, secret: str, question: str, eng: Optional[sa.Engine] = None) -> State:
    """The teacher shows the class the answer (and every round's results); the question takes no more votes."""
    return _teacher_moves(code, secret, question, eng,
                          lambda s: dataclasses.replace(s, open=False, shown=s.round, revealed=True))


@guarded
def set_peer(code: str, secret: str, question: str, peer: bool, eng: Optional[sa.Engine] = None) -> State:
    """The teacher asks the question as "vote, discuss, vote again" (peer) or as one vote: every teacher's tab and
    the projected page follow it."""
    return _teacher_moves(code, secret, question, eng, lambda s: dataclasses.replace(s, peer=bool(peer)))


@guarded
def revealed(code: str, question: str, eng: Optional[sa.Engine] = None) -> bool:
    """Whether the teacher has shown the answer to `question`."""
    return state(code, question, eng).revealed


@guarded
def answer(code: str, browser: str, question: str, choice: str, options: list[str],
           eng: Optional[sa.Engine] = None) -> int:
    """Record a student's vote in the question's open round (their latest one in a round counts); the round it
    went to. The choice must be one of the question's options; the student must have joined; the round must be
    taking votes (open, before its countdown's end, not revealed); the browser's rate limit applies."""
    sa, T = sql()
    from viz_explorer.server import db
    code, browser, question = normal_code(code), check_browser(browser), _question(question)
    if (not isinstance(options, (list, tuple)) or not 0 < len(options) <= OPTIONS_MAX
            or not all(isinstance(o, str) and 0 < len(o) <= CHOICE_MAX for o in options)):
        raise ClassError("options", n=OPTIONS_MAX, chars=CHOICE_MAX)
    if not isinstance(choice, str) or choice not in options:
        raise ClassError("choice")
    now = time.time()
    a, m = T.asked, T.members
    member_and_state = db.prepared(("votes.member_and_state",), lambda: sa.select(m.c.browser, *_STATE(a)).select_from(
        m.outerjoin(a, sa.and_(a.c.code == m.c.code, a.c.question == sa.bindparam("question"))))
        .where(m.c.code == sa.bindparam("code"), m.c.browser == sa.bindparam("browser")))
    with engine_for(eng).begin() as conn:                # the student's membership and the question's state in one read
        row = conn.execute(member_and_state, {"code": code, "browser": browser, "question": question}).first()
        if row is None:
            raise ClassError("join")
        s = _state(row[1:])
        if s.revealed:
            raise ClassError("revealed")
        if not s.taking(now):
            raise ClassError("closed")
        rate(conn, browser, now)
        db.upsert(conn, tables().votes, ["code", "browser", "question", "round"],
                  {"code": code, "browser": browser, "question": question, "round": s.round, "choice": choice,
                   "at": now}, ["choice", "at"])
    return s.round


@guarded
def now(code: str, eng: Optional[sa.Engine] = None, *, fresh: float = 0.0) -> tuple[str, int, Optional[str]]:
    """(lesson, step, the bank question the class is on or None) in one read: what every student's box asks every
    few seconds (fresh: seconds one read serves the process's other boxes, shared_reads). ClassError when there is
    no such class."""
    sa, T = sql()
    code, engine = normal_code(code), reader_for(eng)

    def fetch():
        with engine.connect() as conn:
            return conn.execute(sa.select(T.classes.c.lesson, T.classes.c.step, T.focus.c.question)
                                .select_from(T.classes.outerjoin(T.focus, T.focus.c.code == T.classes.c.code))
                                .where(T.classes.c.code == code)).first()
    row = shared_reads.read((engine, "now", code), fetch, fresh)
    if row is None:
        raise ClassError("no_class", code=code)
    return row[0], int(row[1]), row[2]


@guarded
def mine(code: str, browser: str, question: str, eng: Optional[sa.Engine] = None, *,
         fresh: float = 0.0) -> tuple[State, dict[int, str]]:
    """The question's state (shared for `fresh` seconds, as now) and this browser's votes in it by round."""
    sa, _ = sql()
    v = tables().votes
    code, browser, question, engine = normal_code(code), check_browser(browser), _question(question), reader_for(eng)
    s = state(code, question, eng, fresh=fresh)
    from viz_explorer.server import db
    theirs = db.prepared(("votes.mine",), lambda: sa.select(v.c.round, v.c.choice).where(
        v.c.code == sa.bindparam("code"), v.c.browser == sa.bindparam("browser"),
        v.c.question == sa.bindparam("question")))
    with engine.connect() as conn:
        rows = conn.execute(theirs, {"code": code, "browser": browser, "question": question}).all()
    return s, {int(r): c for r, c in rows}


@guarded
def my_answer(code: str, browser: str, question: str, eng: Optional[sa.Engine] = None, *,
              round: int = 1) -> Optional[str]:
    """This browser's own vote in `round` of `question`, None if it has not voted there."""
    sa, _ = sql()
    v = tables().votes
    code, browser = normal_code(code), check_browser(browser)
    with reader_for(eng).connect() as conn:
        return conn.execute(sa.select(v.c.choice).where(v.c.code == code, v.c.browser == browser,
                                                        v.c.question == question, v.c.round == round)).scalar()


def _counts(conn, code: str, question: str, options: Optional[list[str]], round: int) -> dict[str, int]:
    """option -> votes in the round, every option listed (options None: the choices voted for, sorted)."""
    sa, _ = sql()
    v = tables().votes
    rows = conn.execute(sa.select(v.c.choice, sa.func.count()).where(
        v.c.code == code, v.c.question == question, v.c.round == round).group_by(v.c.choice)).all()
    got = {c: int(n) for c, n in rows}
    return dict(sorted(got.items())) if options is None else {o: got.get(o, 0) for o in options}


@guarded
def counts(code: str, secret: str, question: str, options: list[str], eng: Optional[sa.Engine] = None, *,
           round: int = 1) -> dict[str, int]:
    """The teacher's count of a round: option -> how many students chose it (every option listed). The teacher's
    page draws it only once shown (it is projected); the number who voted is answered()'s."""
    code = need_teacher(code, secret, eng)
    with reader_for(eng).connect() as conn:
        return _counts(conn, code, question, options, round)


@guarded
def shown_counts(code: str, question: str, options: Optional[list[str]], eng: Optional[sa.Engine] = None, *,
                 round: int = 1, fresh: float = 0.0) -> dict[str, int]:
    """A round's counts for anyone in the class, once the teacher has shown them; ClassError("hidden") before.
    options None: the choices voted for. fresh: as now (only counts that passed the check are ever shared)."""
    code, question, engine = normal_code(code), _question(question), reader_for(eng)

    def fetch():
        with engine.connect() as conn:
            if _read(conn, code, question).shown < round:
                raise ClassError("hidden")
            return _counts(conn, code, question, options, round)
    key = None if options is None else tuple(options)
    return dict(shared_reads.read((engine, "shown", code, question, round, key), fetch, fresh))


@guarded
def answered(code: str, question: str, eng: Optional[sa.Engine] = None, *, round: int = 1) -> int:
    """How many students have voted in `round` (not how: that stays hidden until shown)."""
    sa, _ = sql()
    v = tables().votes
    code = normal_code(code)
    with reader_for(eng).connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(v).where(
            v.c.code == code, v.c.question == question, v.c.round == round)).scalar_one())


@guarded
def set_focus(code: str, secret: str, question: Optional[str], eng: Optional[sa.Engine] = None) -> None:
    """The teacher puts the class on a bank question (a concept check), or back on its lesson step (None)."""
    code = need_teacher(code, secret, eng)
    f = tables().focus
    from viz_explorer.server import db
    with engine_for(eng).begin() as conn:
        if question is None:
            conn.execute(f.delete().where(f.c.code == code))
        else:
            db.upsert(conn, f, ["code"], {"code": code, "question": _question(question)}, ["question"])
    shared_reads.forget(code)


@guarded
def focus(code: str, eng: Optional[sa.Engine] = None) -> Optional[str]:
    """The bank question the class is on, None when it is on its lesson step."""
    sa, _ = sql()
    f = tables().focus
    with reader_for(eng).connect() as conn:
        return conn.execute(sa.select(f.c.question).where(f.c.code == normal_code(code))).scalar()


@guarded
def class_votes(code: str, secret: str, eng: Optional[sa.Engine] = None) -> list[dict]:
    """Every vote of the class for its teacher's report, oldest student first: {"student": 1-based number in joining
    order, "nickname", "question", "round", "choice", "at"}. No browser id leaves the store."""
    sa, T = sql()
    v = tables().votes
    code = need_teacher(code, secret, eng)
    with reader_for(eng).connect() as conn:
        members = conn.execute(sa.select(T.members.c.browser, T.members.c.nickname).where(T.members.c.code == code)
                               .order_by(T.members.c.joined, T.members.c.browser)).all()
        rows = conn.execute(sa.select(v.c.browser, v.c.question, v.c.round, v.c.choice, v.c.at)
                            .where(v.c.code == code).order_by(v.c.at)).all()
    number = {b: (i + 1, nick) for i, (b, nick) in enumerate(members)}
    return sorted(({"student": number[b][0], "nickname": number[b][1], "question": q, "round": int(r), "choice": c,
                    "at": float(at)} for b, q, r, c, at in rows if b in number),
                  key=lambda d: (d["student"], d["at"]))
