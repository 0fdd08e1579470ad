"""The app's database: short ids for long texts in view links, and the live classes' answers.

One engine per process. Default: SQLite in WAL mode at <VIZ_DATA>/viz.sqlite3 (VIZ_DATA default: data/
beside app.py), so N processes on one machine share it with no set-up. VIZ_DATABASE_URL (a SQLAlchemy
URL, e.g. postgresql+psycopg://user@host/db) points several machines at one PostgreSQL. Tables are made
on first use (metadata.create_all); every module adds its tables to METADATA.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Optional

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[2]
METADATA = sa.MetaData()

texts = sa.Table(                       # a long text behind a view link: its id is a hash of the text
    "texts", METADATA,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False, server_default=sa.text("0")),
)

_lock = threading.Lock()
_engines: dict[str, sa.Engine] = {}


def url() -> str:
    """The database URL in force: VIZ_DATABASE_URL, else the SQLite file under VIZ_DATA."""
    given = os.environ.get("VIZ_DATABASE_URL", "").strip()
    if given:
        return given
    folder = Path(os.environ.get("VIZ_DATA") or ROOT / "data")
    return f"sqlite:///{folder / 'viz.sqlite3'}"


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")        # readers never wait for the writer; N processes share it
    cur.execute("PRAGMA synchronous=NORMAL")      # durable across a killed process (WAL), fast commits
    cur.execute("PRAGMA busy_timeout=5000")       # another process writing: wait, do not fail
    cur.close()


def engine(db_url: Optional[str] = None) -> sa.Engine:
    """The engine for `db_url` (default: url()), made once per process, its tables created."""
    key = db_url or url()
    with _lock:
        eng = _engines.get(key)
        if eng is None:
            if key.startswith("sqlite:///"):
                Path(key[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
                eng = sa.create_engine(key, connect_args={"timeout": 5})
                sa.event.listen(eng, "connect", _sqlite_pragmas)
            else:
                eng = sa.create_engine(key, pool_pre_ping=True, pool_size=4, max_overflow=4)
            METADATA.create_all(eng)
            _engines[key] = eng
    return eng


def dispose() -> None:
    """Close every engine of this process (tests; a forked worker)."""
    with _lock:
        for eng in _engines.values():
            eng.dispose()
        _engines.clear()


def text_id(text: str) -> str:
    """The short id of a text: the first 12 hex digits of its SHA-256 (the same text, the same id)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def put_text(text: str, eng: Optional[sa.Engine] = None) -> str:
    """Store `text` (idempotent) and return its short id; any process reading this database resolves it."""
    eng = eng or engine()
    tid = text_id(text)
    with eng.begin() as conn:
        if conn.execute(sa.select(texts.c.id).where(texts.c.id == tid)).first() is None:
            try:
                with conn.begin_nested():
                    conn.execute(texts.insert().values(id=tid, text=text, created=time.time()))
            except sa.exc.IntegrityError:           # another process stored it meanwhile: same text
                pass
    return tid


def get_text(tid: str, eng: Optional[sa.Engine] = None) -> Optional[str]:
    """The text stored under `tid`, None when there is none (or the id is malformed)."""
    if not isinstance(tid, str) or not 1 <= len(tid) <= 16 or not tid.isalnum():
        return None
    with (eng or engine()).connect() as conn:
        row = conn.execute(sa.select(texts.c.text).where(texts.c.id == tid)).first()
    return None if row is None else row[0]
