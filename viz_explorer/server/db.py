"""The app's database: the texts behind shared links (viz_explorer/server/texts.py) and the live classes' answers.

One engine per process. Default: SQLite in WAL mode at <VIZ_DATA>/viz.sqlite3 (VIZ_DATA default: data/
beside app.py), so N processes on one machine share it with no set-up. VIZ_DATABASE_URL (a SQLAlchemy
URL, e.g. postgresql+psycopg://user@host/db) points several machines at one PostgreSQL. Every module adds its
tables to METADATA and makes them on its first use of an engine (ready).
"""
from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import Callable, Optional, Sequence, TypeVar

import sqlalchemy as sa

from viz_explorer.server import data_folder

METADATA = sa.MetaData()
S = TypeVar("S")

_lock = threading.Lock()
_engines: dict[str, sa.Engine] = {}
_made: "weakref.WeakKeyDictionary[sa.Engine, set]" = weakref.WeakKeyDictionary()   # tables made, per engine
_prepared: dict[tuple, object] = {}         # prepared()'s statements
_readers: "weakref.WeakKeyDictionary[sa.Engine, sa.Engine]" = weakref.WeakKeyDictionary()


def url() -> str:
    """The database URL in force: VIZ_DATABASE_URL, else the SQLite file under VIZ_DATA."""
    given = os.environ.get("VIZ_DATABASE_URL", "").strip()
    if given:
        return given
    folder = data_folder.folder()
    return f"sqlite:///{folder / 'viz.sqlite3'}"


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")        # readers never wait for the writer; N processes share it
    cur.execute("PRAGMA synchronous=NORMAL")      # durable across a killed process (WAL), fast commits
    cur.execute("PRAGMA busy_timeout=5000")       # another process writing: wait, do not fail
    cur.close()


def engine(db_url: Optional[str] = None) -> sa.Engine:
    """The engine for `db_url` (default: url()), made once per process; tables are made by ready."""
    key = db_url or url()
    with _lock:
        eng = _engines.get(key)
        if eng is None:
            if key.startswith("sqlite:///"):
                Path(key[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
                eng = sa.create_engine(key, connect_args={"timeout": 5})
                sa.event.listen(eng, "connect", _sqlite_pragmas)
            else:
                # No ping before each use (a round trip on every checkout): a connection the server dropped fails
                # its statement, SQLAlchemy then invalidates the whole pool, and again_if_dropped tries once more.
                eng = sa.create_engine(key, pool_size=4, max_overflow=4)
            _engines[key] = eng
    return eng


def reads(eng: sa.Engine) -> sa.Engine:
    """`eng` for statements that only read: on PostgreSQL its autocommit twin (the same pool), so a read is one round
    trip, without the BEGIN before it and the ROLLBACK when the connection goes back; SQLite's driver begins no
    transaction for a read, so there it is `eng` itself. Each statement sees what was committed when it ran, as in
    PostgreSQL's default READ COMMITTED transaction."""
    if eng.dialect.name != "postgresql" or eng.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        return eng
    got = _readers.get(eng)
    if got is None:
        with _lock:
            got = _readers.setdefault(eng, eng.execution_options(isolation_level="AUTOCOMMIT"))
    return got


def again_if_dropped(call: Callable[[], S]) -> S:
    """call(), made once more if it failed on a connection the database had dropped (PostgreSQL restarted): the
    failure invalidated the pool, so the second try connects afresh. A statement that fails for another reason, or a
    database still down, raises as it did."""
    try:
        return call()
    except sa.exc.DBAPIError as e:
        if not e.connection_invalidated:
            raise
    return call()


def dispose() -> None:
    """Close every engine of this process (tests; a forked worker)."""
    with _lock:
        for eng in _engines.values():
            eng.dispose()
        _engines.clear()
        _made.clear()


def ready(eng: sa.Engine, tables: list[sa.Table]) -> sa.Engine:
    """`eng` with `tables` created on it (once per engine and table: a module's tables may be defined after the
    engine was made)."""
    with _lock:
        made = _made.setdefault(eng, set())
        todo = [tb for tb in tables if tb.name not in made]
        if todo:
            METADATA.create_all(eng, tables=todo)
            made.update(tb.name for tb in todo)
    return eng


def prepared(key: tuple, build: Callable[[], S]) -> S:
    """The statement build() makes (its values as bind parameters), made once per process for `key`: SQLAlchemy
    otherwise builds a statement's expression and its cache key on every call, two to three times what running it
    costs on SQLite (a class's 200 phones run a few such statements a second each)."""
    got = _prepared.get(key)
    if got is None:
        with _lock:
            got = _prepared.setdefault(key, build())
    return got


def _upsert_statement(dialect: str, table: sa.Table, keys: Sequence[str], columns: Sequence[str], set_: Callable,
                      returning=None):
    if dialect == "postgresql":                    # only the dialect in use is imported
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    insert = dialect_insert(table).values({c: sa.bindparam(c) for c in columns})
    stmt = insert.on_conflict_do_update(index_elements=list(keys), set_=set_(insert.excluded))
    return stmt if returning is None else stmt.returning(returning)


def upsert(conn: sa.Connection, table: sa.Table, keys: Sequence[str], values: dict, update: Sequence[str]):
    """INSERT `values` … ON CONFLICT (keys) DO UPDATE SET the columns named in `update` to their new values, in the
    engine's own dialect (SQLite, PostgreSQL); the statement is made once per shape (prepared)."""
    dialect, update = conn.dialect.name, tuple(update)
    stmt = prepared(("upsert", dialect, table.name, tuple(keys), tuple(values), update),
                    lambda: _upsert_statement(dialect, table, keys, list(values),
                                              lambda new: {c: new[c] for c in update}))
    return conn.execute(stmt, values)


def count_hit(conn: sa.Connection, hits: sa.Table, browser: str, now: float, window_s: float) -> int:
    """Count one action of `browser` in `hits` (columns browser, window, n) in the database, so a limit holds
    across processes; the number of its actions in this window so far, this one included (one round trip: the
    upsert returns it)."""
    window, dialect = int(now // window_s), conn.dialect.name
    count = prepared(("count_hit", dialect, hits.name), lambda: _upsert_statement(
        dialect, hits, ["browser", "window"], ["browser", "window", "n"], lambda new: {"n": hits.c.n + 1}, hits.c.n))
    n = conn.execute(count, {"browser": browser, "window": window, "n": 1}).scalar_one()
    if n == 1:                                   # a browser's first action in a window: forget its old windows
        old = prepared(("old_hits", hits.name), lambda: hits.delete().where(hits.c.browser == sa.bindparam("browser"),
                                                                           hits.c.window < sa.bindparam("window")))
        conn.execute(old, {"browser": browser, "window": window})
    return n
