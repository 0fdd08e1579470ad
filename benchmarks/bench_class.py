"""A live class under load: N students (light websocket clients, benchmarks/stclient.py) join one class, then
all answer within a few seconds while the teacher's chart refreshes as a browser's would (its fragment every
second). Prints: answers recorded (from the database, and on the teacher's chart), the submit time per answer
(p50/p95/max: from pressing Send to the server's script_finished for the answer box's fragment, which alone
reruns), and how far the teacher's chart lags behind the last answer.

    python -m benchmarks.bench_class                           # its own server on checkpoints/, 60 students in 5 s
    python -m benchmarks.bench_class --serve 2                 # deploy/serve.sh: 2 processes behind nginx
    python -m benchmarks.bench_class --students 120 --window 5

Goals: every answer recorded, p95 submit <= 0.5 s, chart lag <= 2 s. The clients share the machine
with the server(s): on a busy machine the numbers are upper bounds.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from tests.class_util import LABELS, open_class, open_teacher, send, teacher_view
from benchmarks.stclient import Server, deploy, stop

OPTS = list(LABELS)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


async def lesson(url: str, code: str, secret: str, n: int, window: float, seed: int):
    rng = random.Random(seed)
    picks = {secrets.token_urlsafe(12): rng.choice(OPTS) for _ in range(n)}
    gate = asyncio.Semaphore(8)                                  # join a few at a time, as a class arrives

    async def arrive(me):
        async with gate:
            s, res = await open_class(url, f"class={code}&me={me}")
            assert not res.exceptions, res.exceptions
            return s
    students = dict(zip(picks, await asyncio.gather(*(arrive(me) for me in picks))))
    teacher, _ = await open_teacher(url, code, secret)
    chart = next(iter(f for f in teacher.fragment_of.values() if f))
    done: dict[str, float] = {}
    submit, single_fragment, errors = [], 0, []

    async def answer(me, s):
        await asyncio.sleep(rng.uniform(0, window))
        res = await send(s, picks[me])
        done[me] = time.perf_counter()
        submit.append(res.seconds)
        nonlocal single_fragment
        single_fragment += len(res.fragments) == 1
        if res.exceptions or not any("Your answer" in e.alert.body for e in res.of("alert")):
            errors.append(res.exceptions or "no confirmation")

    seen = []                                                    # (run started, run ended, answered on the chart)

    async def watch(stop):
        while not stop.is_set():
            t0 = time.perf_counter()
            res = await teacher.rerun(fragment=chart)
            ys, _ = teacher_view(res)
            seen.append((t0, time.perf_counter(), sum(ys)))
            await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))   # run_every=1 s, as the browser
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch(stop))
    t_start = time.perf_counter()
    await asyncio.gather(*(answer(me, s) for me, s in students.items()))
    t_last = max(done.values())
    while not seen or seen[-1][2] < n:
        await asyncio.sleep(0.1)
        if time.perf_counter() - t_last > 30:
            break
    stop.set()
    await watcher
    # the k-th answer's lag: from its Send's reply to the end of the first chart run that showed k answers
    lags = [next((end - d for _, end, shown in seen if end >= d and shown >= k), None)
            for k, d in enumerate(sorted(done.values()), start=1)]
    stale = sum(k < sum(d <= start for d in done.values()) for start, _, k in seen)   # runs missing a done answer
    for s in [*students.values(), teacher]:
        await s.close()
    return picks, submit, single_fragment, errors, t_last - t_start, lags, stale


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--students", type=int, default=60)
    ap.add_argument("--window", type=float, default=5.0, help="seconds over which the answers are spread")
    ap.add_argument("--serve", type=int, default=0, help="N app processes behind nginx (deploy/serve.sh)")
    ap.add_argument("--checkpoints", default=str(ROOT / "checkpoints"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="viz-class-bench-")
    os.environ.setdefault("VIZ_DATA", data)           # the bench's store and the servers' are the same database
    os.environ.update(VIZ_CHECKPOINTS=args.checkpoints, VIZ_CHECKPOINTS_ONLY="1")     # that root alone
    from viz_explorer.classroom import store as cr
    from viz_explorer.classroom import votes as cv
    code, secret = cr.create_class("attention-step-by-step")
    proc = server = None
    try:
        if args.serve:
            proc, url, run_dir = deploy(args.serve, ROOT, echo=True)
        else:
            server = Server(ROOT, args.checkpoints).__enter__()
            url = server.url
        where = f"{args.serve} processes behind nginx" if args.serve else "one process"
        print(f"class {code} on {url} ({where}); {args.students} students answer within {args.window:.0f} s",
              flush=True)
        picks, submit, single, errors, spread, lags, stale = asyncio.run(
            lesson(url, code, secret, args.students, args.window, args.seed))
    finally:
        stop(server, proc)
    if args.serve:
        log = Path(run_dir, "access.log").read_text()
        ups = {u: log.count("upstream=" + u) for u in sorted(set(x.split()[0] for x in log.split("upstream=")[1:]))}
        print(f"nginx      requests per app process: {ups}")
    stored = cv.counts(code, secret, "attention-step-by-step#1:check-in", OPTS)
    want = {o: list(picks.values()).count(o) for o in OPTS}
    print(f"recorded   {sum(stored.values())} of {len(picks)} answers; per option {stored} "
          f"({'equal to' if stored == want else 'DIFFERENT FROM'} what the students sent)")
    print(f"submit     p50 {pct(submit, 0.5):.3f} s  p95 {pct(submit, 0.95):.3f} s  max {max(submit):.3f} s   "
          f"(goal p95 <= 0.5 s); answers sent over {spread:.1f} s")
    print(f"fragment   {single} of {len(submit)} answers reran only the answer box; errors {len(errors)}")
    shown = [x for x in lags if x is not None]
    print(f"chart lag  p50 {pct(shown, 0.5):.2f} s  p95 {pct(shown, 0.95):.2f} s  max {max(shown):.2f} s  "
          f"(goal <= 2 s; the chart reruns every second); {len(lags) - len(shown)} answers never charted, "
          f"{stale} chart runs missed an answer already recorded")


if __name__ == "__main__":
    main()
