"""Databases for tests: a fresh SQLite file, or a throwaway PostgreSQL cluster started here.

`db_url` (a fixture, parametrized "sqlite" / "postgresql") gives a SQLAlchemy URL to an empty database.
PostgreSQL refuses to run as root, so under root the cluster runs as the user `vizpg` (made with useradd if
missing). Where PostgreSQL is not installed the PostgreSQL cases skip, except in CI (CI=true), where they fail:
`.ci/run` installs Debian's `postgresql`.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import pytest

from conftest import skip_or_fail

PG_USER = "vizpg"


def pg_bindir() -> Optional[Path]:
    """The folder of initdb / pg_ctl: `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin."""
    found = []
    if shutil.which("pg_config"):
        try:
            found.append(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                        check=True).stdout.strip())
        except (OSError, subprocess.CalledProcessError):
            pass
    found += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    return next((Path(p) for p in found if (Path(p) / "initdb").exists() and (Path(p) / "pg_ctl").exists()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER], check=True)
    return ["runuser", "-u", PG_USER, "--", *cmd]


class Cluster:
    """A PostgreSQL cluster started here: .url (its base URL), .stop() and .start() (a restart mid-test)."""

    def __init__(self, bindir: Path, folder: Path, port: int):
        self.bindir, self.data, self.folder, self.port = bindir, folder / "data", folder, port
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(_as_user([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l",
                                 str(self.folder / "log"), "-w", "-t", "60", "start"]), check=True, capture_output=True)

    def stop(self, mode: str = "immediate") -> None:
        subprocess.run(_as_user([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
                       capture_output=True)


@contextmanager
def postgres_server():
    """A PostgreSQL cluster in a temp folder on a free loopback port, trust auth: yields its Cluster; stopped and
    removed afterwards."""
    bindir = pg_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="viz-pg-"))
    if os.geteuid() == 0:
        _as_user(["true"])                              # makes the user if needed
        pw = pwd.getpwnam(PG_USER)
        os.chown(folder, pw.pw_uid, pw.pw_gid)
    cluster = Cluster(bindir, folder, _free_port())
    try:
        subprocess.run(_as_user([str(bindir / "initdb"), "-D", str(cluster.data), "-A", "trust", "-U", "postgres",
                                 "-E", "UTF8", "--no-sync"]), check=True, capture_output=True)
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def postgres_cluster():
    """postgres_server's base URL (postgresql+psycopg://postgres@127.0.0.1:PORT/postgres)."""
    with postgres_server() as cluster:
        yield cluster.url


def new_database(base_url: str) -> str:
    """A new empty database in the cluster; its URL."""
    import sqlalchemy as sa
    name = "t_" + uuid.uuid4().hex[:12]
    eng = sa.create_engine(base_url, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    eng.dispose()
    return base_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def pg_cluster():
    """The base URL of a throwaway PostgreSQL cluster for the session (skip, or fail in CI, without one)."""
    if pg_bindir() is None:
        skip_or_fail("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    with postgres_cluster() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A SQLAlchemy URL to an empty database of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'viz.sqlite3'}"
    else:
        yield new_database(request.getfixturevalue("pg_cluster"))
    from viz_explorer.server import db
    db.dispose()
