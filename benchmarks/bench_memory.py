"""The server's memory for a class: one real `streamlit run app.py`, one websocket session that sets N distinct
512-piece texts in turn and opens every page of the navigation for each; the server's RSS after warm-up and
after 10, 25, 50 texts, then after more texts (flat from there on is the goal).

    python -m benchmarks.bench_memory                          # 50 texts, then 25 more, checkpoints/
    python -m benchmarks.bench_memory --texts 13 --more 0 --json /tmp/mem.json

Each page is visited with the text set and its widgets at their defaults; a page that raised (an exception
element) counts as an error. `measure(...)` returns the same numbers as a dict for a driver script.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from benchmarks.stclient import Server, Session
from benchmarks.texts import text_of

ROOT = Path(__file__).resolve().parent.parent
MARKS = (10, 25, 50)                     # texts after which RSS is sampled (besides the end)
SETTLE_S = 3.0                           # idle seconds before the second sample: > viz_explorer.server.memory.MIN_INTERVAL
GOAL_MIB, GOAL_TEXTS = 600, 50           # a class server's RSS goal after 50 long texts


def page_titles() -> list[str]:
    """The English titles of every page of the navigation, in order (viz_explorer/kit/registry.py, as app.py
    builds it; parsing app.py for page("...") calls found none once app.py built them from the registry)."""
    from viz_explorer.kit.registry import PAGES
    from viz_explorer.kit.strings import EN
    return [EN[p.title] for p in PAGES]


def _tokenizer(checkpoints: Path):
    from viz_transformer.core.checkpoint import load_tokenizer, read_config
    return load_tokenizer(checkpoints / "zh-en", read_config(checkpoints / "zh-en"))


async def _visit(s: Session, titles: list[str], text: str) -> tuple[list[str], float]:
    """Set the text, then open every page; (errors as 'page: message', seconds)."""
    t0, errors = time.perf_counter(), []
    r = await s.rerun({"text": text})
    errors += [f"(text): {e}" for e in r.exceptions]
    for title in titles:
        r = await s.goto(title)
        if not r.elements:
            errors.append(f"{title}: nothing rendered")
        errors += [f"{title}: {e}" for e in r.exceptions]
    return errors, time.perf_counter() - t0


def measure(n_texts: int = 50, more: int = 25, checkpoints=None, pieces: int = 512, log=None,
            env: dict | None = None, progress=print) -> dict:
    """Start the server, warm it up (the default text on every page), then visit n_texts + more distinct
    texts of `pieces` pieces on every page. Returns {"rss_mib": {label: MiB}, "errors": [...], ...}."""
    checkpoints = Path(checkpoints or ROOT / "checkpoints")
    tok, titles = _tokenizer(checkpoints), page_titles()
    marks = sorted({m for m in MARKS if m < n_texts} | {n_texts, n_texts + more})
    out = {"pages": titles, "n_texts": n_texts, "more": more, "pieces": pieces, "rss_mib": {},
           "rss_busy_mib": {}, "settle_s": SETTLE_S, "errors": [], "seconds_per_text": []}

    async def sample(server: Server, label: str) -> None:
        out["rss_busy_mib"][label] = server.rss_mib()
        await asyncio.sleep(SETTLE_S)
        out["rss_mib"][label] = server.rss_mib()

    async def go(server: Server) -> None:
        s = await Session.open(server.url)
        try:
            await s.rerun()
            errors, _ = await _visit(s, titles, "我是一名工程师。")
            out["errors"] += errors
            await sample(server, "warm-up")
            progress(f"warm-up: RSS {out['rss_mib']['warm-up']:.0f} MiB ({out['rss_busy_mib']['warm-up']:.0f} "
                     "as the run ended)")
            for i in range(1, n_texts + more + 1):
                errors, secs = await _visit(s, titles, text_of(tok, pieces, seed=i))
                out["errors"] += [f"text {i}: {e}" for e in errors]
                out["seconds_per_text"].append(round(secs, 1))
                if i in marks:
                    label = f"{i} texts"
                    await sample(server, label)
                    progress(f"{label}: RSS {out['rss_mib'][label]:.0f} MiB ({out['rss_busy_mib'][label]:.0f} as "
                             f"the run ended; {secs:.0f} s for the last text, {len(out['errors'])} errors)")
        finally:
            await s.close()

    with Server(ROOT, checkpoints, log=log, env=env) as server:
        asyncio.run(go(server))
    rss = out["rss_mib"]
    out["peak_mib"] = max(rss.values())
    out["growth_after_n_mib"] = rss[f"{n_texts + more} texts"] - rss[f"{n_texts} texts"] if more else 0.0
    return out


def table(res: dict) -> str:
    lines = [f"{'after':>12}  {'RSS MiB':>8}  {'as the run ended':>16}"] + [
        f"{k:>12}  {v:8.0f}  {res['rss_busy_mib'].get(k, float('nan')):16.0f}" for k, v in res["rss_mib"].items()]
    if res["more"]:
        lines.append(f"growth over the last {res['more']} texts: {res['growth_after_n_mib']:+.0f} MiB")
    after = [v for k, v in res["rss_mib"].items() if k != "warm-up" and int(k.split()[0]) >= GOAL_TEXTS]
    goal = f"goal: RSS <= {GOAL_MIB} MiB after {GOAL_TEXTS} texts and after: "
    lines.append(goal + (f"{max(after):.0f} MiB ({'met' if max(after) <= GOAL_MIB else 'NOT met'})" if after
                         else f"not measured (only {res['n_texts'] + res['more']} texts)"))
    lines.append(f"errors: {len(res['errors'])}" + "".join(f"\n  {e}" for e in res["errors"][:20]))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=50, help="distinct texts, each visited on every page")
    p.add_argument("--more", type=int, default=25, help="further texts after --texts (flatness)")
    p.add_argument("--pieces", type=int, default=512, help="length of each text in pieces")
    p.add_argument("--checkpoints", default=str(ROOT / "checkpoints"))
    p.add_argument("--json", help="write the results here")
    p.add_argument("--log", default="/tmp/bench_memory_server.log", help="the server's log")
    a = p.parse_args(argv)
    print(f"load average {os.getloadavg()}; {len(page_titles())} pages; {a.texts} + {a.more} texts of {a.pieces} "
          "pieces", flush=True)
    res = measure(a.texts, a.more, a.checkpoints, a.pieces, a.log, progress=lambda m: print(m, flush=True))
    print(table(res))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, ensure_ascii=False), encoding="utf-8")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
