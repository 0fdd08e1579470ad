"""More than one process: deploy/serve.sh runs two app processes behind Debian's nginx with sticky
sessions, and the 20-students test runs through it: each student sees exactly what a lone session
sees, every request of a student reaches the same process, and both processes get students."""
from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from browser_util import wait_healthy
from conftest import ROOT
from test_concurrency import TEXTS, alone, direct, seen  # noqa: F401 - fixtures

from stclient import free_port, free_ports, student

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = [pytest.mark.browser,          # a real server: two app processes behind nginx
              pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is missing (apt-get install nginx)")]


@pytest.fixture
def balanced(ckpt_root, tmp_path):
    root = tmp_path / "checkpoints"
    shutil.copytree(ckpt_root / "tiny-zh-en", root / "zh-en")
    port, run = free_port(), tmp_path / "run"
    # the app processes on free ports too: serve.sh's own (8601, 8602) may be taken (a developer's own class)
    env = dict(os.environ, VIZ_CHECKPOINTS=str(root), RUN_DIR=str(run), OMP_NUM_THREADS="1",
               VIZ_APP_PORT=str(free_ports(2)),
               VIZ_DATABASE_URL=f"sqlite:///{tmp_path / 'viz.sqlite3'}")          # the live class's store
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(["bash", str(ROOT / "deploy" / "serve.sh"), "2", str(port)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, 180, tmp_path / "serve.log")
        yield url, run, env["VIZ_DATABASE_URL"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)          # serve.sh stops nginx and its app processes
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_twenty_students_through_nginx_with_two_processes(balanced, alone):
    url, run, _ = balanced
    cookies = []

    async def together():
        return await asyncio.gather(*(student(url, text, cookies=cookies) for text in TEXTS))
    results = asyncio.run(together())
    for text, r in zip(TEXTS, results):
        assert not any(x.exceptions for x in r.values()), text
        assert seen(r) == alone[text], text
    routes = defaultdict(set)                           # route cookie -> the processes that served it
    for line in (run / "access.log").read_text().splitlines():
        m = re.search(r"route=(\w+) upstream=([\d.:]+)", line)
        if m:
            routes[m.group(1)].add(m.group(2))
    ours = [c.split("=", 1)[1] for c in cookies]
    assert len(set(ours)) == 20
    assert all(len(routes[c]) == 1 for c in ours), {c: routes[c] for c in ours}   # sticky
    assert len({next(iter(routes[c])) for c in ours}) == 2                         # both processes used


def test_a_class_through_nginx_every_answer_reaches_the_teacher(balanced):
    """Students spread over both processes; the teacher's page (in one of them) counts every answer."""
    import secrets
    from collections import Counter

    from class_util import open_student, open_teacher, send, teacher_view
    from viz_explorer.classroom import store as cr
    from viz_explorer.server import db
    url, run, db_url = balanced
    code, secret = cr.create_class("attention-step-by-step", db.engine(db_url))
    opts = ["got_it", "unsure", "lost"]
    picks = {secrets.token_urlsafe(12): opts[i % 3 if i % 4 else 0] for i in range(12)}

    async def lesson():
        students = [await open_student(url, code, me, sorted(run.glob("app-*.log"))) for me in picks]
        sent = await asyncio.gather(*(send(s, picks[me]) for s, me in zip(students, picks)))
        _, res = await open_teacher(url, code, secret)              # the teacher page, the key typed in
        return students, sent, res
    students, sent, res = asyncio.run(lesson())
    assert not any(r.exceptions for r in sent)
    want = Counter(picks.values())
    assert teacher_view(res) == ([want[o] for o in opts], f"{len(picks)} of {len(picks)}")
    served = set()
    for line in (run / "access.log").read_text().splitlines():
        m = re.search(r"route=(\w+) upstream=([\d.:]+)", line)
        if m and any(s.cookie.endswith("=" + m.group(1)) for s in students):
            served.add(m.group(2))
    assert len(served) == 2, served                       # the students were on both processes
    db.dispose()


def test_one_process_killed_mid_class_loses_no_answer(balanced):
    """Students on both processes answer; one app process is killed (SIGKILL); its students reconnect (through
    nginx, to the other process, as a browser does), find their answer kept and answer the next question; serve.sh
    starts the killed process again."""
    import secrets
    import time
    import urllib.request
    from collections import Counter

    from class_util import open_student, open_teacher, send, teacher_view
    from viz_explorer.classroom import store as cr
    from viz_explorer.classroom import votes as cv
    from viz_explorer.server import db
    url, run, db_url = balanced
    eng = db.engine(db_url)
    code, secret = cr.create_class("attention-step-by-step", eng)
    opts = ["got_it", "unsure", "lost"]
    picks = {secrets.token_urlsafe(12): opts[i % 3] for i in range(10)}
    q = "attention-step-by-step#1:check-in"

    def upstreams() -> dict:
        """route cookie -> the app address nginx sent it to last."""
        out = {}
        for line in (run / "access.log").read_text().splitlines():
            m = re.search(r"route=(\w+) upstream=([\d.:]+)", line)
            if m:
                out[m.group(1)] = m.group(2).split(",")[-1].strip()
        return out

    async def before():
        students = {me: await open_student(url, code, me, sorted(run.glob("app-*.log"))) for me in picks}
        sent = [await send(s, picks[me]) for me, s in students.items()]
        assert not any(r.exceptions for r in sent)
        return students
    students = asyncio.run(before())
    routes = upstreams()
    where = {me: routes[s.cookie.split("=", 1)[1]] for me, s in students.items()}
    victim = Counter(where.values()).most_common(1)[0][0]
    port = int(victim.rsplit(":", 1)[1])
    pid = int(subprocess.run(["pgrep", "-f", f"server.port {port}"], capture_output=True, text=True).stdout.split()[0])
    os.kill(pid, signal.SIGKILL)                                    # mid-class, no shutdown
    cut_off = [me for me in picks if where[me] == victim]
    assert cut_off and len(cut_off) < len(picks)

    async def after():
        for s in students.values():
            try:
                await s.close()
            except Exception:  # noqa: BLE001 - the killed process's sockets are gone already
                pass
        again = {me: await open_student(url, code, me, sorted(run.glob("app-*.log"))) for me in picks}
        kept = {me: cv.my_answer(code, me, q, eng) for me in picks}
        second = {me: opts[(opts.index(picks[me]) + 1) % 3] for me in picks}
        sent = [await send(s, second[me]) for me, s in again.items()]
        _, res = await open_teacher(url, code, secret)
        for s in again.values():
            await s.close()
        return kept, second, sent, res
    kept, second, sent, res = asyncio.run(after())
    assert kept == picks                                            # every answer given before the kill
    assert not any(r.exceptions for r in sent)
    want = Counter(second.values())
    assert teacher_view(res) == ([want[o] for o in opts], f"{len(picks)} of {len(picks)}")
    deadline = time.time() + 120                                    # and the killed process serves again
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://{victim}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(1)
    else:
        raise AssertionError(f"serve.sh did not start the app on {victim} again")
    db.dispose()


def test_the_page_files_come_from_nginx_compressed_and_cached(balanced):
    """A phone's first visit fetches Streamlit's JavaScript, CSS and fonts: nginx serves them from the installed
    package's files (the bytes equal the file on disk), gzip-compressed and cached for good, without the app."""
    import gzip
    import urllib.request
    import streamlit
    url, run, _ = balanced
    index = urllib.request.urlopen(url + "/", timeout=30).read().decode()
    path = re.search(r'src="\./(static/js/[^"]+\.js)"', index).group(1)
    req = urllib.request.Request(f"{url}/{path}", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=30) as r:
        body, headers = r.read(), r.headers
    on_disk = (Path(streamlit.__file__).parent / "static" / path).read_bytes()
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body) == on_disk
    assert len(body) < len(on_disk) and "immutable" in headers["Cache-Control"]
    line = next(x for x in (run / "access.log").read_text().splitlines() if f"/{path}" in x)
    assert line.endswith("upstream=-")                                  # no app process was asked
