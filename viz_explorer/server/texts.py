"""The texts behind shared links: a text too long for an address is stored only when a person asks for a link
("Make the link" in the sidebar's Copy link), under a random id, for a limited time, within a size cap.

    tid = put(text, browser)          # TextRefused (one-line message) past a limit, or when the database fails
    get(tid)                          # Lookup("ok", text) | Lookup("expired") | Lookup("unknown") | Lookup("unavailable")
    purge(older_than_days=None)       # what `viz-transformer texts --purge` removes

Limits, from the environment (a value that is not a positive number is ignored: the default holds):
- VIZ_TEXTS_DAYS (30): a text is kept this many days after it was stored; then its link says it has expired.
- VIZ_TEXTS_MB (64): the table's size; past it the oldest texts go first.
- at most PER_MINUTE stores per browser per minute, counted in the database (it holds across processes).

An expired text leaves its id and date (no text) for TOMBSTONE_TIMES its lifetime, so its link can say "expired"
rather than "unknown". Ids of the old scheme (the first 12 hex digits of the text's SHA-256, table `texts`) still
resolve until they expire.
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from typing import Mapping, NamedTuple, Optional

import sqlalchemy as sa

from viz_explorer.server import db
from viz_explorer.server.refusal import Refusal

ID = re.compile(r"^[A-Za-z0-9_-]{12,16}$")     # token_urlsafe(12) now; 12 hex digits before
DAYS, MB = 30.0, 64.0                           # defaults of VIZ_TEXTS_DAYS and VIZ_TEXTS_MB
PER_MINUTE = 10
MAX_CHARS = 20_000                              # a text longer than any the app takes (core.encoding.MAX_CHARS)
ROW_BYTES = 64                                  # what a row costs beside its text, counted against the cap
TOMBSTONE_TIMES = 10
MESSAGES = {            # TextRefused's key -> its one-line English message (the page shows strings' "link.err.KEY")
    "rate": "too many links from this browser: wait a minute",
    "long": "this text is too long to store ({n:,} characters; at most {max:,})",
    "full": "this text is larger than all the room this server keeps for texts (VIZ_TEXTS_MB)",
    "unavailable": "the server cannot store texts now",
}

shared = sa.Table(
    "shared_texts", db.METADATA,
    sa.Column("id", sa.String(16), primary_key=True),          # random: says nothing about the text
    sa.Column("text", sa.Text, nullable=False),                # "" once expired
    sa.Column("bytes", sa.Integer, nullable=False),            # the text's UTF-8 size, 0 once expired
    sa.Column("created", sa.Float, nullable=False, index=True),
)
old = sa.Table(                                  # the old scheme's texts: read until they expire, never written
    "texts", db.METADATA,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False, server_default=sa.text("0")),
)
hits = sa.Table(                                 # stores per browser and minute
    "text_hits", db.METADATA,
    sa.Column("browser", sa.String(43), primary_key=True),
    sa.Column("window", sa.Integer, primary_key=True),
    sa.Column("n", sa.Integer, nullable=False),
)


class TextRefused(Refusal):
    """A text that was not stored: `key` names why (MESSAGES)."""
    MESSAGES = MESSAGES


class Lookup(NamedTuple):
    status: str                  # "ok", "expired", "unknown" (malformed, never stored, or removed) or "unavailable"
    text: Optional[str] = None


class Limits(NamedTuple):
    days: float
    mb: float
    ignored: tuple[str, ...]     # "NAME=value" of settings that were not positive numbers


def limits(environ: Mapping[str, str] = os.environ) -> Limits:
    """The limits in force: VIZ_TEXTS_DAYS and VIZ_TEXTS_MB where they are positive numbers, else the defaults."""
    values, ignored = [], []
    for name, default in (("VIZ_TEXTS_DAYS", DAYS), ("VIZ_TEXTS_MB", MB)):
        raw = environ.get(name, "").strip()
        try:
            value = float(raw) if raw else default
            if not 0 < value < float("inf"):
                raise ValueError(raw)
        except ValueError:
            value = default
            ignored.append(f"{name}={raw[:20]}")
        values.append(value)
    return Limits(values[0], values[1], tuple(ignored))


def _eng(eng: Optional[sa.Engine]) -> sa.Engine:
    return db.ready(eng or db.engine(), [shared, old, hits])


def _browser_key(browser: str) -> str:
    """The rate limit's key: a hash of the browser's id (the table never holds the id itself)."""
    return hashlib.sha256(browser.encode("utf-8")).hexdigest()[:43]


def put(text: str, browser: str, eng: Optional[sa.Engine] = None, now: Optional[float] = None) -> str:
    """Store `text` for `browser` (any string that names it: a cookie's random id) and return its new random id.
    Expired texts and, past the cap, the oldest ones are removed first. TextRefused past a limit, or when the
    database cannot be written (read-only, full, gone)."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_CHARS:
        raise TextRefused("long", n=len(text) if isinstance(text, str) else 0, max=MAX_CHARS)
    size, cap, now = len(text.encode("utf-8")), limits(), time.time() if now is None else now
    if size + ROW_BYTES > cap.mb * 1e6:
        raise TextRefused("full")
    def store() -> str:
        with _eng(eng).begin() as conn:
            if db.count_hit(conn, hits, _browser_key(browser), now, 60) > PER_MINUTE:
                raise TextRefused("rate")
            tid = secrets.token_urlsafe(12)             # 96 random bits: a clash is not a case to handle
            conn.execute(shared.insert().values(id=tid, text=text, bytes=size, created=now))
            _prune(conn, now, cap)
        return tid
    try:
        return db.again_if_dropped(store)
    except (sa.exc.SQLAlchemyError, OSError) as e:      # read-only, full, gone, or its folder cannot be made
        raise TextRefused("unavailable") from e


def get(tid, eng: Optional[sa.Engine] = None, now: Optional[float] = None) -> Lookup:
    """The text behind a link's id, or why there is none."""
    if not isinstance(tid, str) or not ID.match(tid):
        return Lookup("unknown")
    cutoff = (time.time() if now is None else now) - limits().days * 86400
    def read():
        with db.reads(_eng(eng)).connect() as conn:
            row = conn.execute(sa.select(shared.c.text, shared.c.created).where(shared.c.id == tid)).first()
            return row or conn.execute(sa.select(old.c.text, old.c.created).where(old.c.id == tid)).first()
    try:
        row = db.again_if_dropped(read)
    except (sa.exc.SQLAlchemyError, OSError):
        return Lookup("unavailable")
    if row is None:
        return Lookup("unknown")
    if row[1] < cutoff or not row[0]:
        return Lookup("expired")
    return Lookup("ok", row[0])


def _prune(conn: sa.Connection, now: float, cap: Limits) -> None:
    """Expire what is older than the lifetime (text gone, id and date kept), forget tombstones past
    TOMBSTONE_TIMES the lifetime, and past the cap remove the oldest rows until the table fits."""
    lifetime = cap.days * 86400
    conn.execute(shared.update().where(shared.c.created < now - lifetime, shared.c.bytes > 0).values(text="", bytes=0))
    conn.execute(shared.delete().where(shared.c.created < now - TOMBSTONE_TIMES * lifetime))
    conn.execute(old.delete().where(old.c.created < now - lifetime))
    total = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(shared.c.bytes), 0) + ROW_BYTES * sa.func.count())
                         ).scalar_one()
    if total <= cap.mb * 1e6:
        return
    kept, last = 0, None               # newest first: the first row that does not fit, and all older, go
    for created, size in conn.execute(sa.select(shared.c.created, shared.c.bytes).order_by(shared.c.created.desc())):
        kept += size + ROW_BYTES
        if kept > cap.mb * 1e6:
            last = created
            break
    if last is not None:
        conn.execute(shared.delete().where(shared.c.created <= last))


def summary(eng: Optional[sa.Engine] = None) -> dict:
    """What is stored: texts (with their text), their bytes, expired ids kept, the oldest text's date."""
    with _eng(eng).connect() as conn:
        live = conn.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(shared.c.bytes), 0),
                                      sa.func.min(shared.c.created)).where(shared.c.bytes > 0)).first()
        gone = conn.execute(sa.select(sa.func.count()).where(shared.c.bytes == 0)).scalar_one()
        older = conn.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(sa.func.length(old.c.text)), 0))
                             ).first()
    return {"texts": live[0] + older[0], "bytes": live[1] + older[1], "expired": gone, "oldest": live[2]}


def purge(older_than_days: Optional[float] = None, eng: Optional[sa.Engine] = None,
          now: Optional[float] = None) -> int:
    """Remove every stored text (or those stored more than `older_than_days` ago), ids and all; how many."""
    cutoff = None if older_than_days is None else (time.time() if now is None else now) - older_than_days * 86400
    with _eng(eng).begin() as conn:
        n = 0
        for table in (shared, old):
            stmt = table.delete() if cutoff is None else table.delete().where(table.c.created < cutoff)
            n += conn.execute(stmt).rowcount
    return n
