"""The texts behind shared links (viz_explorer/server/texts.py), on SQLite and PostgreSQL: random ids, the
stores-per-minute limit across processes, the size cap (oldest first), the expiry and its tombstone, the old
content-hash ids, bad ids and a database that cannot be written; and `viz-transformer texts`."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from viz_explorer.server import db, texts

ROOT = Path(__file__).resolve().parent.parent
DAY = 86400


@pytest.fixture
def eng(db_url):    # noqa: F811
    return db.engine(db_url)


def _rows(eng) -> list[tuple]:
    with texts._eng(eng).connect() as conn:       # noqa: SLF001 - the test reads the table the module owns
        return [tuple(r) for r in conn.execute(sa.select(texts.shared).order_by(texts.shared.c.created))]


def test_an_id_is_random_and_the_text_comes_back(eng):
    text = "我是一名工程师。" * 50
    a, b = texts.put(text, "browser-a", eng), texts.put(text, "browser-a", eng)
    assert a != b and texts.ID.match(a) and len(a) == 16          # the same text, two ids: nothing derived from it
    assert hashlib.sha256(text.encode()).hexdigest()[:12] not in (a, b)
    assert texts.get(a, eng) == texts.Lookup("ok", text)
    rows = _rows(eng)
    assert [r[2] for r in rows] == [len(text.encode("utf-8"))] * 2          # its size in UTF-8 bytes


def test_the_rate_limit_holds_across_processes(db_url, monkeypatch):    # noqa: F811
    first, second = db.engine(db_url), sa.create_engine(db_url)            # another process's engine
    now = 1_800_000_000.0
    for i in range(texts.PER_MINUTE):
        texts.put(f"text {i}", "browser-a", first if i % 2 else second, now=now + i)
    with pytest.raises(texts.TextRefused) as refused:
        texts.put("one more", "browser-a", second, now=now + 30)
    assert refused.value.key == "rate" and "wait a minute" in str(refused.value)
    assert texts.put("another browser", "browser-b", first, now=now + 30)        # others are not slowed
    assert texts.put("a minute later", "browser-a", first, now=now + 61)          # the next minute
    assert len(_rows(first)) == texts.PER_MINUTE + 2
    second.dispose()


def test_past_the_cap_the_oldest_go_first(eng, monkeypatch):
    monkeypatch.setenv("VIZ_TEXTS_MB", "0.001")                    # 1,000 bytes
    size = 200                                                      # + ROW_BYTES a row
    ids = [texts.put("x" * size, f"browser-{i}", eng, now=1_800_000_000.0 + i) for i in range(6)]
    fits = 1000 // (size + texts.ROW_BYTES)                        # an independent count: 3 rows fit
    assert [texts.get(i, eng).status for i in ids] == ["unknown"] * (6 - fits) + ["ok"] * fits
    assert sum(r[2] + texts.ROW_BYTES for r in _rows(eng)) <= 1000
    with pytest.raises(texts.TextRefused) as refused:
        texts.put("y" * 1000, "browser-z", eng)                     # larger than the whole cap: refused, kept out
    assert refused.value.key == "full" and [texts.get(i, eng).status for i in ids[-fits:]] == ["ok"] * fits


def test_a_text_expires_and_its_link_says_so(eng, monkeypatch):
    monkeypatch.setenv("VIZ_TEXTS_DAYS", "2")
    t0 = 1_800_000_000.0
    old, new = texts.put("old text", "b1", eng, now=t0), texts.put("new text", "b2", eng, now=t0 + 1.5 * DAY)
    assert texts.get(old, eng, now=t0 + 2.1 * DAY).status == "expired"        # read past its days, before a prune
    texts.put("a third", "b3", eng, now=t0 + 2.1 * DAY)                         # a store prunes
    assert [r[1] for r in _rows(eng)][:2] == ["", "new text"]                  # the text itself is gone
    assert texts.get(old, eng, now=t0 + 2.1 * DAY).status == "expired"
    assert texts.get(new, eng, now=t0 + 2.1 * DAY).text == "new text"
    texts.put("much later", "b4", eng, now=t0 + (texts.TOMBSTONE_TIMES * 2 + 1) * DAY)
    assert texts.get(old, eng).status == "unknown"                             # its tombstone is forgotten too
    assert [r[1] for r in _rows(eng)] == ["", "", "much later"]


def test_an_old_content_hash_id_resolves_until_it_expires(eng, monkeypatch):
    text, now = "a text stored by the old scheme", time.time()
    old_id = hashlib.sha256(text.encode()).hexdigest()[:12]
    with texts._eng(eng).begin() as conn:                            # noqa: SLF001 - a row as the old code wrote it
        conn.execute(texts.old.insert().values(id=old_id, text=text, created=now - 3 * DAY))
    assert texts.get(old_id, eng) == texts.Lookup("ok", text)
    monkeypatch.setenv("VIZ_TEXTS_DAYS", "2")
    assert texts.get(old_id, eng).status == "expired"
    texts.put("prunes", "b", eng)
    assert texts.get(old_id, eng).status == "unknown"


@pytest.mark.parametrize("tid", ["", "0123", "../../etc/passwd", "x" * 40, "abc def ghij", None, 12, "classes"])
def test_a_malformed_id_is_unknown(tid, tmp_path):
    assert texts.get(tid, db.engine(f"sqlite:///{tmp_path / 'v.sqlite3'}")).status == "unknown"


def test_another_tables_key_is_not_a_text(eng):
    from viz_explorer.classroom import store
    code, _ = store.create_class("attention-step-by-step", eng)
    assert texts.get(code + "AAAA", eng).status == "unknown"        # a class code, shaped like an id: no text


def test_too_long_and_garbage_limits(tmp_path, monkeypatch):
    eng = db.engine(f"sqlite:///{tmp_path / 'v.sqlite3'}")
    with pytest.raises(texts.TextRefused) as refused:
        texts.put("x" * (texts.MAX_CHARS + 1), "b", eng)
    assert refused.value.key == "long" and f"{texts.MAX_CHARS:,}" in str(refused.value)
    for raw in ("0", "-3", "abc", "nan", "inf", ""):
        monkeypatch.setenv("VIZ_TEXTS_DAYS", raw)
        monkeypatch.setenv("VIZ_TEXTS_MB", raw)
        cap = texts.limits()
        assert (cap.days, cap.mb) == (texts.DAYS, texts.MB)
        assert len(cap.ignored) == (2 if raw else 0)


def test_a_database_that_cannot_be_written_refuses_with_a_message(tmp_path):
    path = tmp_path / "v.sqlite3"
    eng = db.engine(f"sqlite:///{path}")
    kept = texts.put("stored before", "b", eng)
    db.dispose()
    read_only = sa.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    with pytest.raises(texts.TextRefused) as refused:
        texts.put("after", "b", read_only)
    assert refused.value.key == "unavailable"
    assert texts.get(kept, read_only).text == "stored before"          # reading still works
    read_only.dispose()
    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(b"not a database" * 100)
    assert texts.get(kept, sa.create_engine(f"sqlite:///{broken}")).status == "unavailable"


def test_purge_removes_what_is_asked(eng):
    now = time.time()
    texts.put("ten days old", "b1", eng, now=now - 10 * DAY)
    recent = texts.put("recent", "b2", eng, now=now)
    assert texts.purge(older_than_days=5, eng=eng) == 1 and texts.get(recent, eng).text == "recent"
    assert texts.purge(eng=eng) == 1 and _rows(eng) == []


def _cli(*args, data: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "viz_explorer.launch", "texts", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "VIZ_DATA": str(data), **env})


def test_the_texts_command(tmp_path):
    path = tmp_path / "viz.sqlite3"
    for i in range(3):
        texts.put(f"text number {i}", "b", db.engine(f"sqlite:///{path}"))
    db.dispose()
    r = _cli(data=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("3 texts, ") and "30 days, 64 MB" in r.stdout
    r = _cli("--purge", data=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("removed 3 texts")
    with sqlite3.connect(path) as conn:                                          # sqlite3 itself: the rows are gone
        assert conn.execute("select count(*) from shared_texts").fetchone() == (0,)
    for bad in (["--older-than", "3"], ["--purge", "--older-than", "-1"], ["--purge", "--older-than", "x"]):
        r = _cli(*bad, data=tmp_path)
        assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("viz-transformer texts: error:")
    r = _cli(data=tmp_path, VIZ_DATABASE_URL="postgresql+psycopg://who:pw@127.0.0.1:1/none")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "pw" not in r.stderr
