"""A fresh visitor's first page on a warm server: what every student joining a class waits for, and the teacher
on every new browser. The browser has nothing cached (a new context: Streamlit's ~140 scripts, 11.6 MB, are
fetched and compiled again), the server has the model loaded and the text's run cached.

    python -m benchmarks.first_visit [--page architectures] [--rounds 7] [--before /tmp/old-main] [--busy]

Each tree's server is the README's command, `streamlit run app.py`, with a free --server.port and
--server.headless true, OMP_NUM_THREADS and VIZ_THREADS taken out (the app's own thread policy). Every server is
warmed by one visit; then the rounds alternate the trees, so all see the same machine load. Timed from the
`goto` to the page drawn (benchmarks/cold_start.py's DRAWN: the run over, no skeleton, every chart's SVG, two
animation frames) and to the model's output shown (COMPLETE). --busy: one busy-loop process per core beside
(benchmarks/busy.py). Prints each tree's median and every visit.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path

from benchmarks.busy import BusyLoops
from benchmarks.cold_start import ARGS, CHROMIUM, COMPLETE, DRAWN, TWO_FRAMES, WATCH, launch, stop

ROOT = Path(__file__).resolve().parent.parent


def visit(browser, url: str, page: str, complete: bool) -> dict:
    """One visit in a new browser context (nothing cached): seconds from goto to drawn and to the output shown."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        tab = context.new_page()
        tab.add_init_script(WATCH)
        t0 = time.perf_counter()
        tab.goto(f"{url}/{page}", wait_until="commit")
        tab.wait_for_function(DRAWN, polling=20, timeout=120_000)
        tab.evaluate(TWO_FRAMES)
        drawn = time.perf_counter() - t0
        if complete:
            tab.wait_for_function(COMPLETE, polling=20, timeout=120_000)
            tab.evaluate(TWO_FRAMES)
        return {"drawn_s": drawn, "complete_s": time.perf_counter() - t0 if complete else None}
    finally:
        context.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--page", default="", help="the page's address path (default: the Overview)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--before", action="append", default=[], help="another checkout; its visits alternate with this one's")
    p.add_argument("--no-output", action="store_true", help="the page shows no model output (skip COMPLETE)")
    p.add_argument("--busy", action="store_true", help="one busy-loop process per core beside the servers")
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright
    trees = [Path(b).resolve() for b in args.before] + [ROOT]
    servers = [launch(tree)[:2] for tree in trees]
    runs = {str(tree): [] for tree in trees}
    try:
        with sync_playwright() as pw, (BusyLoops() if args.busy else contextlib.nullcontext()):
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for _, url in servers:                                   # the load, the text's run: cached
                visit(browser, url, args.page, not args.no_output)
            for _ in range(args.rounds):
                for tree, (_, url) in zip(trees, servers):
                    runs[str(tree)].append(visit(browser, url, args.page, not args.no_output))
            browser.close()
    finally:
        for proc, _ in servers:
            stop(proc)
    for tree, visits in runs.items():
        drawn = [v["drawn_s"] for v in visits]
        print(f"{tree}: page drawn, median of {len(drawn)}: {statistics.median(drawn):.2f} s  ("
              + " ".join(f"{x:.2f}" for x in drawn) + ")")
        if not args.no_output:
            print(f"{'':{len(tree)}}  output shown, median: {statistics.median(v['complete_s'] for v in visits):.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"page": args.page, "busy": args.busy, "runs": runs}, indent=1),
                                   encoding="utf-8")


if __name__ == "__main__":
    main()
