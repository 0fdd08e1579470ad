"""200 phones in one class, as phones behave: students arrive over a minute (each a first run of the class page),
their answer box asks "which step are we on?" every 3 s as the browser's fragment timer does, and they vote twice
on each of 5 questions (peer instruction: a vote, the discussion, a second vote) while the teacher moves the class
from question to question and the teacher's chart refreshes every second. A first vote's answers are spread over
--window seconds once every box shows the question; a second vote's, over --window seconds after each student's own
box shows it (a student cannot press a button their screen does not show yet).

    python -m benchmarks.bench_peer                          # its own server on checkpoints/, SQLite
    python -m benchmarks.bench_peer --serve 2                # deploy/serve.sh: 2 processes behind nginx
    VIZ_DATABASE_URL=postgresql+psycopg://… python -m benchmarks.bench_peer

Prints per configuration: votes recorded (the database against what was sent), submit p50/p95/max (from pressing
Send to the server's end of the answer box's run), how long after the teacher moves every student's box shows the
new step (p95, max), the teacher chart's lag behind each vote, the server's CPU and memory per student and the
database rows per student. Goals: every vote recorded, submit p95 <= 0.5 s, every student on the new step <= 4 s,
chart <= 2 s behind. The clients run on the same 2 cores as the server(s): their CPU is the server's loss.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from tests.class_util import open_class, open_teacher
from benchmarks.procfs import cpu_seconds, descendants, rss_mib
from benchmarks.stclient import KeepAlive, Server, deploy, stop
from viz_explorer.classroom.class_watch import EVERY as WATCH

LESSON = "attention-step-by-step"
POLL, CHART = 3.0, 1.0          # the floor's box timer (as the page's before class_watch), live_class.TEACHER_EVERY


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def _shown(res) -> str:
    """The question a run of the answer box shows: its pick's key without lc_pick_ ("" for none)."""
    for e in res.of("radio"):
        key = e.radio.id.split("-", 2)[-1]
        if key.startswith("lc_pick_"):
            return key[len("lc_pick_"):].removesuffix("@2")
    return ""


def page_assets(url: str) -> list[str]:
    """The paths of every static file Chromium fetches on a first visit to the class page (its JavaScript, CSS and
    fonts): what each phone downloads when it joins, unless it has them cached."""
    from playwright.sync_api import sync_playwright
    got = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
        pg = b.new_page(viewport={"width": 390, "height": 844})
        pg.on("request", lambda r: got.append(r.url))
        pg.goto(url + "/live_class?lang=en")
        pg.wait_for_function("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
                             " return a && a.getAttribute('data-test-script-state') === 'notRunning'; }", timeout=90_000)
        pg.wait_for_timeout(1500)
        b.close()
    return list(dict.fromkeys(u.split("://", 1)[1].split("/", 1)[1] for u in got if "/static/" in u))


def fetch(url: str, paths: list[str], cookie: str) -> int:
    """GET `paths` over one keep-alive connection as a browser asks (compressed if the server will); bytes received."""
    import http.client
    host = url.split("://", 1)[1].split("/", 1)[0]
    conn, n = http.client.HTTPConnection(host, timeout=120), 0
    for path in paths:
        conn.request("GET", "/" + path, headers={"Accept-Encoding": "gzip, deflate", "Cookie": cookie})
        r = conn.getresponse()
        n += len(r.read())
        if r.status != 200:
            raise RuntimeError(f"GET /{path}: {r.status}")
    conn.close()
    return n


async def browser_timer(run, stop: asyncio.Event, origin: float, every: float = POLL, clock=time.perf_counter,
                        sleep=asyncio.sleep) -> None:
    """Run `run()` as the browser's fragment timer reruns a `run_every` fragment (Streamlit's frontend calls
    setInterval): at origin + k * every, whatever the previous run took. A tick that passes while a run is in flight
    is one run as soon as it ends (the server queues such requests, and several of them are one run), and the ticks
    after it stay on the same grid, so phones slowed together do not go on polling together."""
    k = 1
    while not stop.is_set():
        await sleep(max(0.0, origin + k * every - clock()))
        if stop.is_set():
            break
        await run()
        due = int((clock() - origin) // every)                   # the latest tick that has passed
        k = due if due > k else k + 1


class Phone:
    """One student: a session on the class page; its answer box's watcher asks for the class's stamp every WATCH
    seconds (an HTTP request, as class_watch.js's fetch) and reruns the box when the stamp differs from the drawn one."""

    def __init__(self, me: str):
        self.me, self.lock, self.s, self.box, self.bytes = me, asyncio.Lock(), None, "", 0
        self.seen: list[tuple[float, str]] = []          # (time a run of the box ended, the question it showed)
        self.asks: list[float] = []                      # seconds each ask for the stamp took
        self.stamp, self.path, self.origin = "", "", 0.0

    def drawn(self, res) -> None:
        """What a run of the box left in the browser: the watcher's stamp and question, and its timer restarted."""
        for e in res.of("bidi_component"):
            if e.bidi_component.component_name.endswith("class_watch"):
                w = json.loads(e.bidi_component.json)
                self.stamp = w["stamp"]
                self.path = "/class-stamp?" + urllib.parse.urlencode({"code": w["code"], "q": w["q"]})
                self.box = self.s.fragment_of.get(e.bidi_component.id, self.box)
        self.origin = time.perf_counter()
        self.seen.append((self.origin, _shown(res)))

    async def arrive(self, url: str, code: str, assets: list[str], pool) -> float:
        """The page load: the websocket session and the page's first run, and the page's static files over 6
        connections as a browser fetches them (none when `assets` is empty)."""
        t0 = time.perf_counter()
        self.s, res = await open_class(url, f"class={code}&me={self.me}")
        if assets:
            loop = asyncio.get_running_loop()
            got = await asyncio.gather(*(loop.run_in_executor(pool, fetch, url, assets[i::6], self.s.cookie)
                                         for i in range(6)))
            self.bytes = sum(got)
        assert not res.exceptions, res.exceptions
        self.drawn(res)
        assert self.path, "the answer box mounted no watcher"
        return time.perf_counter() - t0

    async def watch(self, url: str, stop: asyncio.Event) -> None:
        """class_watch.js: every WATCH seconds on the beat of the page's first draw (the box's runs keep it), ask
        for the stamp; a different one reruns the box (an ask due during a run is made at its end, as the run's
        render mounts the watcher again)."""
        http = KeepAlive(url, self.s.cookie)

        async def ask():
            t0 = time.perf_counter()
            status, body = await http.get(self.path)
            self.asks.append(time.perf_counter() - t0)
            if status == 200 and json.loads(body)["stamp"] != self.stamp:
                async with self.lock:
                    res = await self.s.rerun(fragment=self.box)
                self.drawn(res)
        await browser_timer(ask, stop, self.origin, WATCH)
        await http.close()

    @staticmethod
    def _pick(qid: str, round_: int) -> str:
        return f"lc_pick_{qid}" + ("" if round_ == 1 else "@2")

    async def shows(self, qid: str, round_: int) -> None:
        """Once the box shows the round's vote (redrawn by its watcher; at most 20 s)."""
        key = self._pick(qid, round_)
        for _ in range(200):
            if any(w.endswith("-" + key) for w in self.s.ids):
                return
            await asyncio.sleep(0.1)

    async def vote(self, qid: str, round_: int, index: int):
        """Pick option `index` of the question's radio as shown (its label, as the browser sends it) and Send."""
        key = self._pick(qid, round_)
        await self.shows(qid, round_)        # a student votes once the box shows the vote
        async with self.lock:
            _, proto = self.s._widget(key)
            res = await self.s.rerun({key: proto.radio.options[index]}, trigger="lc_send")
        self.drawn(res)
        return res


async def lesson(url: str, code: str, secret: str, n: int, questions: int, arrive_s: float, window: float,
                 seed: int, server_cpu, assets: list[str], rss):
    from viz_explorer.classroom import bank
    from viz_explorer.classroom import votes as cv
    checks = bank.load_bank("concept-checks")
    asked = checks.half("a")[:questions]           # the check before the lesson: the teacher moves through it
    letters = {checks.class_id(q): q.letters for q in asked}
    await asyncio.to_thread(cv.set_focus, code, secret, checks.class_id(asked[0]))
    rng = random.Random(seed)
    phones = [Phone(secrets.token_urlsafe(12)) for _ in range(n)]
    stop = asyncio.Event()
    loads, pollers = [], []
    teacher, _ = await open_teacher(url, code, secret)      # the teacher opens the class first
    chart = teacher.auto_rerun
    rss0, cpu0, t_arrive = rss(), server_cpu(), time.perf_counter()

    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max_workers=96)

    async def come(i, ph):
        await asyncio.sleep(arrive_s * i / n)
        loads.append(await ph.arrive(url, code, assets, pool))
        pollers.append(asyncio.create_task(ph.watch(url, stop)))
    await asyncio.gather(*(come(i, ph) for i, ph in enumerate(phones)))
    arrived_s, rss1 = time.perf_counter() - t_arrive, rss()
    sent: dict[tuple, str] = {}
    submit, errors, moves, charted = [], [], [], []

    async def watch():                                    # the teacher's chart, as the browser reruns it
        while not stop.is_set():
            t0 = time.perf_counter()
            res = await teacher.rerun(fragment=chart)
            specs = [json.loads(e.plotly_chart.spec) for e in res.of("plotly_chart")]
            total = [sum(int(y) for y in tr["y"]) for tr in specs[-1]["data"]] if specs else []
            charted.append((time.perf_counter(), total))
            await asyncio.sleep(max(0.0, CHART - (time.perf_counter() - t0)))
    watcher = asyncio.create_task(watch())
    late: list[float] = []

    async def clock():                       # how late the phones' own loop wakes: their delay, not the server's
        while not stop.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.05)
            late.append(time.perf_counter() - t0 - 0.05)
    ticker = asyncio.create_task(clock())
    cpu1, t_lesson, mine1 = server_cpu(), time.perf_counter(), time.process_time()
    for step, q in enumerate(asked):
        qid = checks.class_id(q)
        if step:
            t_move = time.perf_counter()
            await asyncio.to_thread(cv.set_focus, code, secret, qid)
            moves.append((qid, t_move))
            await asyncio.sleep(POLL + 1.5)               # every box has polled once after the move
        for round_ in (1, 2):
            if round_ == 2:
                await asyncio.to_thread(cv.open_round, code, secret, qid, round=2)

            async def one(ph, delay: float, i: int):
                if round_ == 2:                        # a student reacts to their own screen: the second vote
                    await ph.shows(qid, round_)        # shows once their box has been redrawn (0-3 s after it opens)
                await asyncio.sleep(delay)
                res = await ph.vote(qid, round_, i)
                ok = not res.exceptions and any("Your answer" in e.alert.body for e in res.of("alert"))
                sent[ph.me, qid, round_] = letters[qid][i]
                submit.append((res.seconds, time.perf_counter(), qid, round_))
                if not ok:
                    errors.append(res.exceptions or "no confirmation")
            await asyncio.gather(*(one(ph, rng.uniform(0, window), rng.randrange(len(letters[qid]))) for ph in phones))
            await asyncio.sleep(CHART * 2.5)               # the chart catches up
            if round_ == 1:
                await asyncio.to_thread(cv.close_round, code, secret, qid)
        await asyncio.to_thread(cv.show, code, secret, qid)
    lesson_s, cpu2, mine2 = time.perf_counter() - t_lesson, server_cpu(), time.process_time()
    stop.set()
    await watcher
    await ticker
    await asyncio.gather(*pollers)
    # each move: when each phone's first poll that ended after it showed the new step
    follow = []
    for qid, t_move in moves:
        for ph in phones:
            t = next((t for t, k in ph.seen if t >= t_move and k == qid), None)
            follow.append(None if t is None else t - t_move)
    # the chart's lag: from the k-th vote's reply in a round to the end of the first chart run counting k there
    lags = []
    for key in {(q, r) for _, _, q, r in submit}:
        done = sorted(d for _, d, q, r in submit if (q, r) == key)
        for k, d in enumerate(done, start=1):
            lags.append(next((t - d for t, total in charted if t >= d and len(total) >= key[1]
                              and total[key[1] - 1] >= k), None))
    for ph in phones:
        await ph.s.close()
    await teacher.close()
    pool.shutdown()
    return dict(loads=loads, bytes=[ph.bytes for ph in phones], rss0=rss0, rss1=rss1, rss2=rss(), arrived_s=arrived_s,
                sent=sent, submit=[x[0] for x in submit], errors=errors, clients_cpu=mine2 - mine1,
                submit_at=[(round(x[1] - t_lesson, 3), x[2], x[3]) for x in submit],   # (s into the lesson, q, round)
                follow=follow, lags=lags, late=late, lesson_s=lesson_s, cpu_arrive=cpu1 - cpu0, cpu_lesson=cpu2 - cpu1,
                asks=[a for ph in phones for a in ph.asks], box_runs=sum(len(ph.seen) for ph in phones))


async def floor_polls(url: str, n: int, arrive_s: float, questions: int, window: float, server_cpu, seed: int):
    """n sessions of a bare app's answer box (floor_apps/poll_box.py), each rerun every POLL seconds, voting as the
    class's phones do (questions x 2 votes, each spread over `window` s, the same pauses): the server's CPU seconds
    per second per session over that time, and each vote's seconds from Send to the end of its run."""
    from benchmarks.stclient import Session
    rng = random.Random(seed)
    sessions = []

    async def come(i):
        await asyncio.sleep(arrive_s * i / n)
        s = await Session.open(url)
        await s.rerun()
        sessions.append((s, asyncio.Lock(), time.perf_counter()))
    await asyncio.gather(*(come(i) for i in range(n)))
    stop = asyncio.Event()

    async def poll(s, lock, origin):
        async def once():
            async with lock:
                await s.rerun(fragment=s.auto_rerun)
        await browser_timer(once, stop, origin)
    tasks = [asyncio.create_task(poll(*x)) for x in sessions]
    await asyncio.sleep(POLL)
    cpu0, t0, submit = server_cpu(), time.perf_counter(), []

    async def vote(s, lock):
        await asyncio.sleep(rng.uniform(0, window))
        async with lock:
            _, proto = s._widget("lc_pick_floor")
            res = await s.rerun({"lc_pick_floor": proto.radio.options[rng.randrange(4)]}, trigger="lc_send")
        submit.append(res.seconds)
    for step in range(questions):
        if step:
            await asyncio.sleep(POLL + 1.5)
        for _ in (1, 2):
            await asyncio.gather(*(vote(s, lock) for s, lock, _ in sessions))
            await asyncio.sleep(CHART * 2.5)
    per = (server_cpu() - cpu0) / (time.perf_counter() - t0) / n
    stop.set()
    await asyncio.gather(*tasks)
    for s, *_ in sessions:
        await s.close()
    return per, submit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--students", type=int, default=200)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--arrive", type=float, default=60.0, help="seconds over which the students arrive")
    ap.add_argument("--window", type=float, default=10.0, help="seconds over which a vote's answers are spread")
    ap.add_argument("--serve", type=int, default=0, help="N app processes behind nginx (deploy/serve.sh)")
    ap.add_argument("--checkpoints", default=str(ROOT / "checkpoints"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="", help="write the numbers to this file")
    ap.add_argument("--no-assets", action="store_true", help="phones that have the page's static files cached")
    ap.add_argument("--floor", action="store_true", help="first, a bare app's answer box (benchmarks/floor_apps/"
                    "poll_box.py) polled and voted in by as many sessions: its CPU per student and submit times")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="viz-peer-bench-")
    os.environ.setdefault("VIZ_DATA", data)
    os.environ.update(VIZ_CHECKPOINTS=args.checkpoints, VIZ_CHECKPOINTS_ONLY="1")
    from viz_explorer.classroom import store as cr
    from viz_explorer.classroom import votes as cv
    from viz_explorer.server import db
    code, secret = cr.create_class(LESSON)
    proc = server = None
    procs: list = []
    try:
        if args.serve:
            proc, url, run_dir = deploy(args.serve, ROOT)
            procs = descendants(proc.pid, b"streamlit") + descendants(proc.pid, b"nginx")
        else:
            server = Server(ROOT, args.checkpoints).__enter__()
            url = server.url
            procs = [server.proc.pid]

        def server_cpu() -> float:
            return sum(cpu_seconds(p) for p in procs)

        def rss() -> float:
            return sum(rss_mib(p) for p in procs)
        where = f"{args.serve} processes behind nginx" if args.serve else "one process"
        kind = db.engine().dialect.name
        print(f"class {code} on {url} ({where}, {kind}); {args.students} students arrive over {args.arrive:.0f} s, "
              f"{args.questions} questions voted twice", flush=True)
        floor, fsub = None, []
        if args.floor and not args.serve:
            with Server(ROOT, args.checkpoints, args=(), entry="benchmarks/floor_apps/poll_box.py") as bare:
                floor, fsub = asyncio.run(floor_polls(bare.url, args.students, min(args.arrive, 20.0), args.questions,
                                                      args.window, lambda: cpu_seconds(bare.proc.pid), args.seed))
            print(f"floor      a bare app's answer box, {args.students} sessions polling and voting as the phones "
                  f"below: {floor * 1000:.2f} ms of CPU per second per session; submit p50 {pct(fsub, .5):.3f} s "
                  f"p95 {pct(fsub, .95):.3f} s max {max(fsub):.3f} s", flush=True)
        assets = [] if args.no_assets else page_assets(url)
        print(f"page       {len(assets)} static files a first visit fetches", flush=True)
        out = asyncio.run(lesson(url, code, secret, args.students, args.questions, args.arrive, args.window,
                                 args.seed, server_cpu, assets, rss))
    finally:
        stop(server, proc)
    sent = out["sent"]
    got = {(v["question"], v["round"], v["student"]): v["choice"] for v in cv.class_votes(code, secret)}
    recorded = len(got)
    got_counts = sorted((q, r, c) for (q, r, _), c in got.items())
    want_counts = sorted((q, r, c) for (_, q, r), c in sent.items())
    with db.engine().connect() as conn:
        import sqlalchemy as sa
        t = cr.tables()
        ours = sa.select(t.members.c.browser).where(t.members.c.code == code)       # this class's rows only
        rows = {name: conn.execute(sa.select(sa.func.count()).select_from(tb).where(where)).scalar_one()
                for name, tb, where in (("members", t.members, t.members.c.code == code),
                                        ("votes", t.votes, t.votes.c.code == code),
                                        ("hits", t.hits, t.hits.c.browser.in_(ours)))}
    follow = [x for x in out["follow"] if x is not None]
    n = args.students
    lines = [
        f"arrival    {n} page loads over {out['arrived_s']:.1f} s: p50 {pct(out['loads'], .5):.2f} s p95 "
        f"{pct(out['loads'], .95):.2f} s max {max(out['loads']):.2f} s; static files {sum(out['bytes']) / n / 2**20:.2f}"
        f" MiB per phone",
        f"recorded   {recorded} of {len(sent)} votes ({'equal to' if got_counts == want_counts else 'DIFFERENT FROM'} "
        f"what was sent, per question, round and option); errors {len(out['errors'])}",
        f"submit     p50 {pct(out['submit'], .5):.3f} s p95 {pct(out['submit'], .95):.3f} s max "
        f"{max(out['submit']):.3f} s (goal p95 <= 0.5 s)",
        f"new step   p50 {pct(follow, .5):.2f} s p95 {pct(follow, .95):.2f} s max {max(follow or [float('nan')]):.2f} s;"
        f" {len(out['follow']) - len(follow)} of {len(out['follow'])} never (goal: every student <= 4 s after the teacher moves)",
        f"watching   {len(out['asks'])} asks for the class's stamp over the lesson ({len(out['asks']) / out['lesson_s']:.0f}"
        f" a second), each p50 {pct(out['asks'], .5):.3f} s p95 {pct(out['asks'], .95):.3f} s; {out['box_runs']} runs of "
        f"the students' boxes in all (first runs, redraws and votes)",
        f"chart lag  p50 {pct([x for x in out['lags'] if x is not None], .5):.2f} s p95 "
        f"{pct([x for x in out['lags'] if x is not None], .95):.2f} s; {sum(x is None for x in out['lags'])} votes never "
        f"charted (goal <= 2 s)",
        f"server     CPU {out['cpu_arrive']:.1f} s for the arrivals, {out['cpu_lesson']:.1f} s over the lesson's "
        f"{out['lesson_s']:.0f} s ({out['cpu_lesson'] / out['lesson_s'] / n * 1000:.2f} ms of CPU per second per "
        f"student); RSS {out['rss0']:.0f} MiB with the teacher alone, {out['rss1']:.0f} with every student, "
        f"{out['rss2']:.0f} after the lesson ({(out['rss1'] - out['rss0']) / n:.2f} MiB per student); the simulated "
        f"phones used {out['clients_cpu']:.1f} s of CPU over the lesson, on the same cores",
        f"phones     their own event loop woke late by p50 {pct(out['late'], .5):.3f} s p95 {pct(out['late'], .95):.3f} s "
        f"max {max(out['late'] or [float('nan')]):.3f} s (every 50 ms; included in the times above)",
        f"database   rows per student: {rows['members'] / n:.1f} member, {rows['votes'] / n:.1f} votes, "
        f"{rows['hits'] / n:.1f} rate-limit windows",
    ]
    print("\n".join(lines), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(students=n, where=where, database=kind, lines=lines,
                                                   submit=out["submit"], submit_at=out["submit_at"], follow=out["follow"],
                                                   loads=out["loads"], lags=out["lags"], late=out["late"], floor_cpu=floor,
                                                   floor_submit=fsub, asks=out["asks"], box_runs=out["box_runs"]),
                                              indent=1))


if __name__ == "__main__":
    main()
