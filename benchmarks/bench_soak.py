"""A class server left running: one real `streamlit run app.py`, EXPLORERS visitors who each, again and again, open the
app on one of three checkpoints (two trained here and an imported Hugging Face folder) in English or Chinese, type a
text no one typed before and open every page; and a class of STUDENTS who join and answer every question while the
teacher moves through the lesson. The server's RSS is sampled every minute; at the end, what its caches hold
(VIZ_STATS_FILE: viz_explorer/server/cache_sizes.py).

    python -m benchmarks.bench_soak                                  # 30 minutes, 20 explorers, 30 students
    python -m benchmarks.bench_soak --minutes 3 --explorers 4 --students 10 --json /tmp/soak.json
    python -m benchmarks.bench_soak --minutes 10 --trace            # and what stays alive, by where it was made

Goal: after the first WARM_MIN minutes, RSS grows by at most 5%, and it never passes the server's RSS before any
visitor (minute 0: the imports and the default model) plus the code its pages imported later (measured by importing
the same modules into a fresh process after the same start-up) plus the configured memo budget plus the weights of
the other models it holds at the end. RSS is printed whole and split into anonymous memory and mapped files, with
glibc's account of its heap at the end; then at rest (6 s after the last visitor) and once Streamlit has dropped the
closed tabs' sessions (server.disconnectedSessionTTL later: what the server keeps for good). Errors (a page that raised, a lost answer) are counted and printed.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Optional
from urllib.parse import quote

from benchmarks.procfs import anon_regions_mib, mapped_files_mib, rss_parts_mib
from benchmarks.stclient import Server, Session
from benchmarks.texts import text_of
from tests.class_util import LABELS, open_student, open_teacher, send
from viz_explorer.server import cache_sizes

ROOT = Path(__file__).resolve().parent.parent

WARM_MIN, GROWTH_GOAL = 5, 0.05
TRACE_FROM_MIN = 1                       # --trace: by then the first visits have imported the pages' code
PIECES = (12, 48, 160)                   # texts of these lengths in turn: sentences to paragraphs
LESSON = "attention-step-by-step"


def checkpoints_roots(work: Path) -> tuple[str, list[str]]:
    """(VIZ_CHECKPOINTS, the three names the explorers open): the shipped checkpoints/ and a root of one imported
    folder, the real all-MiniLM-L6-v2 as the tests cached it when it is there, else a GPT-2-shaped folder saved by
    transformers (tests/hf_util.py). Copied, not linked: a root refuses links that leave it."""
    import shutil
    root = work / "imported"
    root.mkdir()
    minilm = Path.home() / ".cache" / "viz-transformer-tests" / "minilm-0.1.2"
    if (minilm / "modules.json").exists():
        shutil.copytree(minilm, root / "all-MiniLM-L6-v2")
        name = "all-MiniLM-L6-v2"
    else:
        from tests import hf_util
        hf_util.build(hf_util.SHAPE_BY_ID["gpt2-3heads-tied"], root / "gpt2-tiny")
        name = "gpt2-tiny"
    return os.pathsep.join([str(ROOT / "checkpoints"), str(root)]), ["zh-en", "en-stories", name]


def titles(lang: str) -> list[str]:
    from viz_explorer.kit.registry import PAGES
    from viz_explorer.kit.strings import EN
    from viz_explorer.kit.strings_zh import ZH
    return [(ZH if lang == "zh" else EN).get(p.title, EN[p.title]) for p in PAGES if p.name != "live_class"]


async def explorer(url: str, names: list[str], toks: dict, seed: int, stop: float, out: dict) -> None:
    """One visitor after another in this slot: a new session each round (a new tab), every page once."""
    rng, n = random.Random(seed), 0
    while time.monotonic() < stop:
        n += 1
        ckpt, lang = names[(seed + n) % len(names)], "zh" if (seed + n) % 2 else "en"
        corpus = "zh" if ckpt == "zh-en" else "en"          # the model's own language: a text it reads
        text = text_of(toks[corpus], PIECES[n % len(PIECES)], seed=seed * 100_003 + n, lang=corpus)
        s = await Session.open(url)
        s.query = f"checkpoint={ckpt}&lang={lang}&text={quote(text)}" if len(quote(text)) < 1500 else \
            f"checkpoint={ckpt}&lang={lang}"
        try:
            r = await s.rerun()
            if "text=" not in s.query:
                r = await s.rerun({"text": text})
            out["errors"] += [f"{ckpt}/{lang} overview: {e}" for e in r.exceptions]
            for title in titles(lang):
                if time.monotonic() >= stop:
                    break
                if title not in s.pages:
                    continue                        # a page this model's navigation does not list
                r = await s.goto(title)
                out["errors"] += [f"{ckpt}/{lang} {title}: {e}" for e in r.exceptions]
                out["page_runs"] += 1
                await asyncio.sleep(rng.uniform(0, 1))
        except Exception as e:  # noqa: BLE001 - a dropped connection counts as an error, the soak goes on
            out["errors"].append(f"{ckpt}/{lang}: {type(e).__name__}: {e}")
        finally:
            await s.close()
        out["visits"] += 1


async def classroom(url: str, n: int, stop: float, out: dict) -> None:
    """A class on LESSON's first step: everyone joins; each minute every student answers again within 20 s (the
    latest answer counts) while the teacher's chart refreshes; the store must then hold every student's latest."""
    from viz_explorer.classroom import store as cr
    from viz_explorer.classroom import votes as cv
    code, secret = cr.create_class(LESSON)
    students = {}
    for _ in range(n):
        me = secrets.token_urlsafe(12)
        students[me] = await open_student(url, code, me)
    teacher, _ = await open_teacher(url, code, secret)
    chart = next(f for f in teacher.fragment_of.values() if f)
    rng, opts = random.Random(7), list(LABELS)
    try:
        while time.monotonic() < stop - 20:
            t0 = time.monotonic()
            picks = {me: rng.choice(opts) for me in students}
            for me, s in students.items():
                r = await send(s, picks[me])
                out["errors"] += [f"student: {e}" for e in r.exceptions]
                out["answers"] += 1
                await asyncio.sleep(20 / n)
            r = await teacher.rerun(fragment=chart)
            out["errors"] += [f"teacher: {e}" for e in r.exceptions]
            got = cv.counts(code, secret, f"{LESSON}#1:check-in", opts)
            want = {o: list(picks.values()).count(o) for o in opts}
            if got != want:
                out["errors"].append(f"the store holds {got}, the students sent {want}")
            await asyncio.sleep(max(0.0, min(60 - (time.monotonic() - t0), stop - time.monotonic() - 20)))
    finally:
        for s in [*students.values(), teacher]:
            await s.close()


def soak(minutes: float, explorers: int, students: int, log: str, progress=print, trace: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="soak-") as work:     # a copy of the imported folder, the class store
        return _soak(Path(work), minutes, explorers, students, log, progress, trace)


def _soak(work: Path, minutes: float, explorers: int, students: int, log: str, progress, trace: bool) -> dict:
    roots, names = checkpoints_roots(work)
    stats = work / "stats.json"
    env = {"VIZ_DATA": str(work / "data"), "VIZ_STATS_FILE": str(stats), "VIZ_CHECKPOINTS": roots,
           "VIZ_CHECKPOINTS_ONLY": "1"}
    os.environ["VIZ_DATA"] = env["VIZ_DATA"]                 # the class store this process writes: the server's database
    from viz_transformer.core.checkpoint import load_tokenizer, read_config
    toks = {lang: load_tokenizer(ROOT / "checkpoints" / name, read_config(ROOT / "checkpoints" / name))
            for lang, name in (("zh", "zh-en"), ("en", "en-stories"))}
    out = {"minutes": minutes, "explorers": explorers, "students": students, "checkpoints": names, "rss_mib": [],
           "rss_anon_mib": [], "rss_file_mib": [],
           "errors": [], "visits": 0, "page_runs": 0, "answers": 0, "load": []}
    with Server(ROOT, None, log=log, env=env) as server:
        last, steady = server.rss_mib(), 0                  # the start-up load (imports, default model) done
        for _ in range(120):
            time.sleep(1)
            now = server.rss_mib()
            steady = steady + 1 if abs(now - last) < 2 else 0
            last = now
            if steady >= 5:
                break
        out["regions_start_mib"] = rss_now(server)

        async def run():
            t0 = time.monotonic()
            stop = t0 + minutes * 60

            async def sampler():
                minute = 0
                while time.monotonic() < stop + 1:
                    await asyncio.sleep(max(0.0, t0 + minute * 60 - time.monotonic()))
                    out["rss_mib"].append(round(server.rss_mib(), 1))
                    parts = rss_parts_mib(server.proc.pid)
                    for kind in ("anon", "file"):
                        out[f"rss_{kind}_mib"].append(round(parts.get(kind, float("nan")), 1))
                    out["load"].append(round(os.getloadavg()[0], 1))
                    progress(f"minute {minute}: RSS {out['rss_mib'][-1]:.0f} MiB (anon {out['rss_anon_mib'][-1]:.0f}, "
                             f"file {out['rss_file_mib'][-1]:.0f}), load {out['load'][-1]}, "
                             f"{out['visits']} visits, {out['page_runs']} page runs, {out['answers']} answers, "
                             f"{len(out['errors'])} errors")
                    if trace and minute == TRACE_FROM_MIN:
                        Path(str(stats) + cache_sizes.TRACE).touch()  # the server traces from its next page run
                    minute += 1
            tasks = [explorer(server.url, names, toks, i + 1, stop, out) for i in range(explorers)]
            if students:
                tasks.append(classroom(server.url, students, stop, out))
            await asyncio.gather(sampler(), *tasks)
        asyncio.run(run())
        time.sleep(6)                                        # one more write of the server's stats
        out["rss_rest_mib"] = rss_now(server)                # at rest: the runs done and collected
        out["rss_expired_mib"] = asyncio.run(after_expiry(server, str(stats) + cache_sizes.SNAP if trace else None))
        out["caches"] = json.loads(stats.read_text()) if stats.exists() else {}
        traced = Path(str(stats) + cache_sizes.TRACED)
        out["trace"] = json.loads(traced.read_text()) if traced.exists() else None
    out["later_imports_mib"], out["later_imports_anon_mib"] = later_imports_mib(out["caches"].pop("modules", []))
    return out


async def after_expiry(server, snap: Optional[str] = None) -> dict:
    """RSS once the closed tabs' sessions are gone: Streamlit keeps a closed tab's session (its state, its last page's
    download buttons with their figures) for server.disconnectedSessionTTL, and drops expired ones only when it next
    stores one. So: wait that long, close one more session (the store expires the others), then run one more (its end
    removes their files; the collection follows)."""
    from streamlit import config
    await asyncio.sleep(config.get_option("server.disconnectedSessionTTL") + 5)
    for closing in (True, False):
        s = await Session.open(server.url)
        await s.rerun()
        if closing:
            await s.close()
    if snap:            # the trace is written by the next run, after this run's end dropped the expired sessions'
        Path(snap).touch()              # download buttons (Streamlit keeps their figures until a run ends)
        await s.rerun()
    await asyncio.sleep(3)
    now = rss_now(server)
    await s.close()
    return now


def rss_now(server) -> dict:
    """The server's RSS now, MiB: total, anon and file; the anonymous part by region (procfs.anon_regions_mib); the
    weights held in their files' pages (weights_mapped)."""
    return {"total": round(server.rss_mib(), 1), **{k: round(v, 1) for k, v in rss_parts_mib(server.proc.pid).items()},
            **{k: round(v, 1) for k, v in anon_regions_mib(server.proc.pid).items()},
            "weights_mapped": round(mapped_files_mib(server.proc.pid), 1)}


def weights_mib(folders) -> float:
    """The weight files' size of these model folders (safetensors, or a PyTorch .bin)."""
    total = 0
    for folder in folders:
        files = [f for f in Path(folder).glob("*") if f.suffix in (".safetensors", ".bin") and f.is_file()]
        total += sum(f.stat().st_size for f in files)
    return total / 2**20


LATER_IMPORTS = """
import json, sys
from benchmarks.procfs import rss_mib, rss_parts_mib
from viz_explorer.startup import load
load.load()
before, anon = rss_mib(), rss_parts_mib()["anon"]
for name in json.loads(sys.stdin.read()):
    if name not in sys.modules:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module made at run time (a page script's), or one that needs its parent's state
            pass
print(rss_mib() - before, rss_parts_mib()["anon"] - anon)
"""


def later_imports_mib(modules: list) -> tuple[float, float]:
    """(all, anonymous) RSS in MiB the code the server imported after start-up takes: a fresh process makes the
    start-up load, then imports those modules, and says how much its RSS grew (Captum and matplotlib, for one, come
    with the attribution page). The anonymous part is what the modules build; the rest is their files' pages."""
    import subprocess
    done = subprocess.run([sys.executable, "-c", LATER_IMPORTS], input=json.dumps(modules), capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    try:
        total, anon = map(float, done.stdout.strip().splitlines()[-1].split())
        return round(total, 1), round(anon, 1)
    except (ValueError, IndexError):
        return float("nan"), float("nan")


def verdict(res: dict) -> list[str]:
    rss = res["rss_mib"]
    warm = rss[min(WARM_MIN, len(rss) - 1)]
    after = rss[min(WARM_MIN, len(rss) - 1):]
    memo = res.get("caches", {}).get("memo", {})
    budget_mib = memo.get("budget", 0) / 2**20
    held = res.get("caches", {}).get("models_held", [])
    heap, py = res.get("caches", {}).get("heap"), res.get("caches", {}).get("python_arenas")
    from viz_explorer.server import defaults
    later = [p for p in held if Path(p).name != defaults.CHECKPOINT]    # the default model is in minute 0's RSS
    code = res.get("later_imports_mib", 0.0)
    in_memory = res.get("caches", {}).get("models_bytes")                 # float32 in memory: a 16-bit file's twice
    models = sum(in_memory.get(p, 0) for p in later) / 2**20 if in_memory else weights_mib(later)
    ceiling = rss[0] + code + budget_mib + models
    anon = res.get("rss_anon_mib") or [float("nan")]
    end = res.get("rss_expired_mib") or res.get("rss_rest_mib") or {}
    anon_end, mapped = end.get("anon", anon[-1]), end.get("weights_mapped", 0.0)    # weights in file pages: not anon
    anon_ceiling = anon[0] + res.get("later_imports_anon_mib", float("nan")) + budget_mib + models - mapped
    lines = [f"RSS per minute (MiB): {', '.join(f'{v:.0f}' for v in rss)}",
             f"of which anonymous: {', '.join(f'{v:.0f}' for v in res.get('rss_anon_mib', []))}",
             f"of which mapped files: {', '.join(f'{v:.0f}' for v in res.get('rss_file_mib', []))}",
             "at start-up, after the default model: " + ", ".join(f"{k} {v:.0f}" for k, v in
                                                                 res.get("regions_start_mib", {}).items()) + " MiB",
             "at rest, 6 s after the last visitor: " + (", ".join(f"{k} {v:.0f}" for k, v in res["rss_rest_mib"].items())
                                                         + " MiB" if res.get("rss_rest_mib") else "not measured"),
             "after the closed sessions expired: " + (", ".join(f"{k} {v:.0f}" for k, v in res["rss_expired_mib"].items())
                                                      + " MiB" if res.get("rss_expired_mib") else "not measured"),
             f"load average per minute: {', '.join(str(v) for v in res['load'])}",
             f"{res['visits']} visits, {res['page_runs']} page runs, {res['answers']} answers, {len(res['errors'])} errors",
             f"after minute {WARM_MIN}: {warm:.0f} -> {after[-1]:.0f} MiB ({(after[-1] / warm - 1) * 100:+.1f}%; "
             f"highest {max(after):.0f}); goal <= +{GROWTH_GOAL * 100:.0f}%: "
             f"{'met' if max(after) <= warm * (1 + GROWTH_GOAL) else 'NOT met'}",
             f"trend (RSS samples swing with what is running at the minute): median of minutes {WARM_MIN}-"
             f"{WARM_MIN + 4} {median(after[:5]):.0f} MiB, of the last five {median(after[-5:]):.0f} MiB "
             f"({(median(after[-5:]) / median(after[:5]) - 1) * 100:+.1f}%)",
             f"ceiling: {rss[0]:.0f} (minute 0: start-up, the default model) + {code:.0f} (code imported later) + "
             f"{budget_mib:.0f} (memo budget) + {models:.0f} (weights of the {len(later)} other models held, in memory) "
             f"= {ceiling:.0f} MiB; highest {max(rss):.0f}: "
             f"{'met' if max(rss) <= ceiling else 'NOT met'}",
             f"private (anonymous) memory, the files' pages apart: ceiling {anon[0]:.0f} (minute 0) + "
             f"{res.get('later_imports_anon_mib', float('nan')):.0f} (code imported later) + {budget_mib:.0f} + "
             f"{models:.0f} - {mapped:.0f} (weights held in their files' pages) = {anon_ceiling:.0f} MiB; "
             f"highest {max(anon):.0f}, at the end {anon_end:.0f}: "
             f"{'met' if max(anon) <= anon_ceiling else 'NOT met'}",
             f"memo: {memo.get('entries')} entries, {memo.get('bytes', 0) / 2**20:.1f} of {budget_mib:.0f} MiB, "
             f"{memo.get('hits')} hits, {memo.get('misses')} misses, {memo.get('evictions')} evictions, "
             f"{memo.get('refused')} refused",
             f"models held: {', '.join(Path(p).name for p in res.get('caches', {}).get('models_held', []))}",
             f"garbage collections: {res.get('caches', {}).get('collections')}",
             f"collector's counts: {res.get('caches', {}).get('gc_counts')}, frozen: {res.get('caches', {}).get('gc_frozen')}, "
             f"threads: {res.get('caches', {}).get('threads')}",
             "glibc's heap (allocator.heap): " + (", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in heap.items()
                                                           if k != "arenas_free_chunks") if heap else "not known"),
             "Python's arenas (cache_sizes.python_arenas): " + (", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in py.items()
                                                                      if v is not None) if py else "not known")]
    if res.get("trace"):
        tr = res["trace"]
        lines.append(f"made after minute {TRACE_FROM_MIN} and alive once the closed sessions expired "
                     f"(tracemalloc, one frame): {tr['bytes'] / 2**20:.1f} MiB in {tr['blocks']:,} blocks; largest:")
        lines += [f"  {s['bytes'] / 2**20:6.2f} MiB {s['blocks']:8,}  {s['at']}" for s in tr["top"][:10]]
    lines += [f"  {e}" for e in res["errors"][:15]]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--explorers", type=int, default=20)
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--log", default="/tmp/bench_soak_server.log")
    p.add_argument("--trace", action="store_true", help=f"trace the server's Python allocations from minute "
                   f"{TRACE_FROM_MIN} and print where those still alive after expiry were made (page runs ~3x slower)")
    a = p.parse_args(argv)
    print(f"{a.minutes:g} minutes, {a.explorers} explorers, {a.students} students; load {os.getloadavg()}", flush=True)
    res = soak(a.minutes, a.explorers, a.students, a.log, progress=lambda m: print(m, flush=True), trace=a.trace)
    print("\n".join(verdict(res)))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, ensure_ascii=False), encoding="utf-8")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
