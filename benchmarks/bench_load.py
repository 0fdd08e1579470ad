"""Many students at once against one app process: light websocket clients (benchmarks/stclient.py),
each opening the app, typing its own sentence, and opening the attention, decoding (one step) and
knock-out (one ablation) pages. Prints page times (p50/p95/max) and the server's CPU seconds per
student for each number of users, and the largest number whose p95 page time stays within --target.

    python -m benchmarks.bench_load                       # starts its own server on checkpoints/
    python -m benchmarks.bench_load --users 1,4,8 --url http://127.0.0.1:8501   # against a running one
    python -m benchmarks.bench_load --users 8 --profile   # and where the server's CPU goes (py-spy)

A page time is one rerun: from the request to the server's script_finished (what a student waits for).
The clients share the machine with the server: on a busy machine the numbers are upper bounds.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks.stclient import Server, student

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ["我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。", "他是我的朋友。", "我们明天去北京。",
             "这是我的书。", "她在学校工作。", "我是一名工程师。", "我的猫喜欢睡觉。", "他每天早上跑步。", "我们一起去吃饭吧。",
             "这本书很有意思。", "你住在哪里？", "我想学中文。", "他们在公园里玩。", "请给我一杯水。", "我昨天看了一部电影。",
             "明天会下雨吗？", "我的朋友是医生。", "她唱歌唱得很好。", "我们的老师很好。", "这个苹果很甜。"]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


async def wave(url: str, n: int, think: float, stagger: float):
    async def one(i):
        await asyncio.sleep(i * stagger)
        return await student(url, SENTENCES[i % len(SENTENCES)] if i < len(SENTENCES) else f"{SENTENCES[i % 24]}{i}",
                             think)
    return await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)


def summarize(n, results, cpu, wall):
    times, errors = [], 0
    per_step = {}
    for r in results:
        if isinstance(r, BaseException):
            errors += 1
            continue
        for step, x in r.items():
            errors += bool(x.exceptions)
            if step != "open":
                times.append(x.seconds)
            per_step.setdefault(step, []).append(x.seconds)
    p95 = pct(times, 0.95) if times else float("inf")
    print(f"{n:>5} users  pages {len(times):>4}  p50 {statistics.median(times):5.2f}s  p95 {p95:5.2f}s  "
          f"max {max(times):5.2f}s  errors {errors}  server CPU {cpu:6.1f}s = {cpu / n:.2f}s/student  "
          f"wall {wall:5.1f}s", flush=True)
    print("       per step p95: " + "  ".join(f"{k} {pct(v, 0.95):.2f}s" for k, v in per_step.items()), flush=True)
    return p95, errors


def profile_summary(raw: Path, top: int = 25) -> None:
    """py-spy's collapsed stacks -> the functions (of this project, and the biggest others) holding the
    most samples, inclusive."""
    incl, total = Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        frames = stack.split(";")
        for f in set(frames):
            incl[f] += int(count)
    print(f"\nprofile: {total} samples of the server (all threads, idle excluded); inclusive share:")
    for f, c in incl.most_common(400):
        name = f.split(" (")[0]
        where = f[f.find("(") + 1: f.rfind(")")] if "(" in f else ""
        if any(s in where for s in ("viz_explorer/", "viz_transformer/", "app.py", "plotly/", "streamlit/elements",
                                    "streamlit/runtime/caching", "pandas/", "torch/")):
            print(f"  {100 * c / total:5.1f}%  {name:40s} {where}")
            top -= 1
        if top == 0:
            break


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", default="1,4,8,12,16,20", help="comma-separated numbers of students")
    p.add_argument("--url", help="a running server (default: start one on --checkpoints)")
    p.add_argument("--checkpoints", default=str(ROOT / "checkpoints"))
    p.add_argument("--think", type=float, default=0.0, help="seconds each student waits between pages")
    p.add_argument("--stagger", type=float, default=0.0, help="seconds between students starting")
    p.add_argument("--target", type=float, default=2.0, help="p95 page time a class can live with")
    p.add_argument("--profile", action="store_true", help="sample the server with py-spy during the last wave")
    a = p.parse_args(argv)
    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}", flush=True)
    server = None if a.url else Server(ROOT, a.checkpoints, log="/tmp/bench_load_server.log").__enter__()
    url = a.url or server.url
    try:
        asyncio.run(wave(url, 1, 0, 0))                         # warm-up: model loaded, caches filled
        ok = 0
        users = [int(x) for x in a.users.split(",")]
        for i, n in enumerate(users):
            spy = None
            if a.profile and i == len(users) - 1 and server:
                raw = Path("/tmp/bench_load_profile.txt")
                spy = subprocess.Popen(["py-spy", "record", "--pid", str(server.proc.pid), "--format", "raw",
                                        "--rate", "50", "-o", str(raw)], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                time.sleep(1)
            cpu0, t0 = server.cpu_seconds() if server else 0.0, time.perf_counter()
            results = asyncio.run(wave(url, n, a.think, a.stagger))
            wall = time.perf_counter() - t0
            cpu = (server.cpu_seconds() - cpu0) if server else float("nan")
            p95, errors = summarize(n, results, cpu, wall)
            if spy:
                spy.send_signal(2)
                spy.wait(timeout=60)
                profile_summary(raw)
            if p95 <= a.target and not errors:
                ok = n
        print(f"\nlargest class with p95 page time <= {a.target:.1f}s and no errors: {ok} students "
              f"(of those tried: {a.users}); load average after: {os.getloadavg()}"
              + (f"; server RSS {server.rss_mib():.0f} MiB" if server else ""))
    finally:
        if server:
            server.__exit__()
    return 0


if __name__ == "__main__":
    sys.exit(main())
