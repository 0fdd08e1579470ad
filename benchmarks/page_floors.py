"""The slowest pages' first views beside their floor: the page's own computation for a new text, alone. Each page is
timed click to pixels (benchmarks/pixels.py: the README's server, headless Chromium, a new text submitted first),
then the same texts' computation is made here, in this process with the server stopped, by the app's own functions
(viz_explorer/server/cached.py) under the app's thread policy (one torch thread; a page's independent runs on
threads.each's threads, as the page runs them). A page cannot be quicker than its floor; what lies between the two
is Streamlit, the figures and the browser.

    python -m benchmarks.page_floors [--tokens 128,512] [--texts 3] [--json out.json]

Pages: the Overview after a new text (the text's run), Positions on/off (the run without positions, then the order
test with and without, side by side) and Compare architectures (each compared translator loaded, unless held, and
run, side by side). Goals (benchmarks/pixels.py): a first view <= 1.0 s at 128 pieces, <= 2.0 s at 512.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOALS = {128: 1.0, 512: 2.0}
PAGES = {"new text (Overview)": "overview", "Positions on/off": "positions", "Compare architectures": "architectures"}


def computation(kind: str, text: str) -> None:
    """The computation the page `kind` makes for a new text, with the app's functions (the text's run is made first
    and not counted where the page finds it made: the sidebar makes it)."""
    from viz_explorer.server import cached, defaults, threads
    zh = str(ROOT / "checkpoints" / defaults.CHECKPOINT)        # the model the served pages run: the app's default
    stamp = cached.folder_stamp(Path(zh))
    if kind == "overview":
        cached.run_text(zh, stamp, text)
        return
    cached.run_text(zh, stamp, text)                     # made by the sidebar before the page runs
    t0 = time.perf_counter()
    if kind == "positions":                             # as the page: the run without positions beside the test with
        threads.each(lambda job: job(), (lambda: cached.positions_off(zh, stamp, text),
                                         lambda: cached.order_test(zh, stamp, text, "reverse", True)))
        cached.order_test(zh, stamp, text, "reverse", False)
    else:
        paths = [info.path for info in cached.comparison().values()]
        threads.each(lambda p: cached.arch_view(str(p), cached.folder_stamp(p), text), paths)
    return time.perf_counter() - t0


def floors(texts: dict[int, list[str]]) -> dict:
    """{(kind, tokens): [seconds per text]}: each page's computation for each new text."""
    from viz_explorer.server import threads
    threads.apply()
    import torch
    torch.set_num_threads(threads.count())
    out = {}
    computation("overview", "我是一名工程师。")               # the model loaded, as a running server has it
    for n, ts in texts.items():
        for kind in PAGES.values():
            times = []
            for text in ts:
                t0 = time.perf_counter()
                took = computation(kind, text)
                times.append(took if took is not None else time.perf_counter() - t0)
            out[kind, n] = times
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="128,512")
    p.add_argument("--texts", type=int, default=3, help="new texts per length (each page's first view on each)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    os.environ.pop("OMP_NUM_THREADS", None)
    from playwright.sync_api import sync_playwright
    from benchmarks import pixels
    from benchmarks.stclient import Server
    from benchmarks.texts import text_of
    from viz_transformer.core.checkpoint import load_tokenizer, read_config
    from viz_explorer.server import defaults
    folder = ROOT / "checkpoints" / defaults.CHECKPOINT               # texts of so many pieces of the model the pages run
    tok = load_tokenizer(folder, read_config(folder))
    tokens = [int(x) for x in a.tokens.split(",")]
    seeds = [1000 * k for k in range(a.texts)]
    pages = [title for title in PAGES if not title.startswith("new text")]
    rows = []
    with Server(ROOT, str(ROOT / "checkpoints"), log="/tmp/bench_page_floors_server.log") as server:
        with sync_playwright() as pw:
            browser = pixels.launch(pw)
            for seed in seeds:                     # a new text each round: every page's first view
                rows += pixels.measure(browser, server.url, tok, tokens, pages, repeat=1, seed=seed,
                                       log=lambda s: None)
            browser.close()
    texts = {n: [text_of(tok, n, seed=seed + n) for seed in seeds] for n in tokens}
    floor = floors(texts)
    out = []
    print(f"{'page':24s} {'pieces':>6s} {'first view':>11s} {'floor':>7s} {'view / floor':>13s} {'goal':>6s}")
    for title, kind in PAGES.items():
        for n in tokens:
            seen = [r["seconds"] if title.startswith("new text") else r["first_seconds"]
                    for r in rows if r["page"] == title and r["tokens"] == n]
            view, low = statistics.median(seen), statistics.median(floor[kind, n])
            goal = GOALS.get(n)
            out.append({"page": title, "tokens": n, "first_view_s": view, "floor_s": low, "views": seen,
                        "floors": floor[kind, n], "goal_s": goal})
            print(f"{title:24s} {n:>6d} {view:>10.2f}s {low:>6.2f}s {view / low:>12.2f}x "
                  f"{'' if goal is None else f'{goal:.1f} s'} {'' if goal is None else ('met' if view <= goal else 'MISSED')}"
                  f"{'  (floor above the goal)' if goal is not None and low > goal else ''}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
