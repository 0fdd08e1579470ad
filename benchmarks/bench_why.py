"""Why this attention at the speed of a click: the real server (`streamlit run app.py`, the app's own thread policy,
nothing set but the checkpoint folder) and headless Chromium; for zh-en and a random model with Qwen2.5-0.5B's
configuration (a Hugging Face qwen2 folder, benchmarks/bench_pages_hf.py builds it once, about 2 GB) at 128 and 512
pieces: the page's first view after a new text (its term run is made then), a click on a cell of the head's heatmap
until the cell's terms are drawn (goal ≤ 1 s at 512 on zh-en, ≤ 3 s on the 0.5B folder), beside the floor: a rerun of
the same page that computes nothing new (the grouping switched back). The server's RSS added by the page (after the
same text on the attention page, then after the page) and, in this process, one cell's split and the term run's size.

    python -m benchmarks.bench_why                                  # both models, 128 and 512 pieces
    python -m benchmarks.bench_why --models zh-en --tokens 512 --json benchmarks/results/bench_why.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.bench_pages_hf import hf_root
from benchmarks.pixels import CHROMIUM, ARGS, Traffic, measure_action, nav_pages, settle
from benchmarks.stclient import Server
from benchmarks.texts import text_of

GOALS = {"zh-en": 1.0, "qwen2.5-0.5b-random": 3.0}       # a click at 512 pieces, seconds
CLICKS = 3

_ARM = """() => { const root = document.querySelector('[data-test-script-state]'); window.__ran = false;
  window.__obs = new MutationObserver(() => { if (root.getAttribute('data-test-script-state') === 'running') window.__ran = true; });
  window.__obs.observe(root, {attributes: true}); }"""
_DRAWN = """() => { const root = document.querySelector('[data-test-script-state]');
  if (root.getAttribute('data-test-script-state') === 'running') window.__ran = true;
  return window.__ran && root.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-testid="stSkeleton"]') && !document.querySelector('[data-stale="true"]')
    && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg')); }"""
_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
_AXES = """() => { const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  return [gd.layout.xaxis.range, gd.layout.yaxis.range]; }"""


def click_cell(page, i: int, j: int, timeout_ms: int = 600_000) -> float:
    """Seconds from a mouse click on cell (i, j) of the page's first heatmap (its window's row i, column j) until
    the rerun it starts has ended and every chart is drawn (two frames painted)."""
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    chart.scroll_into_view_if_needed()
    box = chart.locator(".nsewdrag").first.bounding_box()
    (x0, x1), (bottom, top) = page.evaluate(_AXES)
    x = box["x"] + (j - x0) / (x1 - x0) * box["width"]
    y = box["y"] + (i - top) / (bottom - top) * box["height"]
    page.mouse.move(x, y)
    page.wait_for_timeout(100)                            # the hover has named the cell: the click selects it
    page.evaluate(_ARM)
    t0 = time.perf_counter()
    page.mouse.click(x, y)
    page.wait_for_function(_DRAWN, timeout=timeout_ms, polling="raf")
    page.evaluate(_FRAMES)
    return time.perf_counter() - t0


def in_process(root: Path, name: str, text: str) -> dict:
    """One cell's split on the term run, and the term run's own time and size, in this process (the term run as the
    page makes it: after the text's run, its output teacher-forced)."""
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis.score_terms import score_terms, term_run
    hm = load_checkpoint(root / name)
    shared = hm.run(text, lean=True)                      # the app's run of the text: its output is teacher-forced
    t0 = time.perf_counter()
    run = term_run(hm, text, shared.output_ids)
    made = time.perf_counter() - t0
    block = "decoder.cross_attn" if hm.cfg.is_encoder_decoder else "decoder.self_attn"
    n_q = len(run.tgt_pieces)
    times = []
    for q in (n_q // 2, n_q - 1, n_q // 3):
        t0 = time.perf_counter()
        score_terms(hm, run, block, hm.cfg.n_decoder_layers - 1, 1, q, q // 2)
        times.append(time.perf_counter() - t0)
    size = sum(t.numel() * t.element_size() for t in run.cache._t.values())
    return {"term_run_s": made, "cell_s": statistics.median(times), "term_run_mib": size / 2**20}


def walk(browser, server: Server, name: str, text: str, log=print) -> dict:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    traffic = Traffic(page)
    page.goto(f"{server.url}/attention?checkpoint={name}&lang=en")
    settle(page, 1_800_000)
    links = dict(nav_pages(page))
    new_text = measure_action(page, traffic, "submit", text, timeout_ms=1_800_000)
    before = server.rss_mib()
    first = measure_action(page, traffic, "click", links["Why this attention"], timeout_ms=1_800_000)
    added = server.rss_mib() - before
    n = len(page.evaluate("""() => document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot').data[0].y"""))
    clicks = [click_cell(page, i, j) for i, j in ((n // 2, 1), (n - 1, 2), (n // 3, 0))[:CLICKS]]
    radio = page.get_by_text("by layer", exact=True)
    page.evaluate(_ARM)
    t0 = time.perf_counter()
    radio.click()
    page.wait_for_function(_DRAWN, timeout=600_000, polling="raf")
    page.evaluate(_FRAMES)
    floor = time.perf_counter() - t0
    page.close()
    row = {"new_text_s": new_text["seconds"], "first_view_s": first["seconds"], "click_s": statistics.median(clicks),
           "clicks_s": [round(c, 3) for c in clicks], "floor_s": floor, "rss_added_mib": added,
           "exceptions": first["exceptions"]}
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="zh-en,qwen2.5-0.5b-random")
    p.add_argument("--tokens", default="128,512")
    p.add_argument("--work", default="/tmp/bench_pages_hf", help="where the 0.5B folder is built once")
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args(argv)
    from playwright.sync_api import sync_playwright
    from viz_transformer import load_checkpoint
    rows = []
    for name in a.models.split(","):
        root = ROOT / "checkpoints" if name == "zh-en" else hf_root(Path(a.work))
        tok = load_checkpoint(root / name).tokenizer
        with Server(ROOT, root, log=f"/tmp/bench_why_{name}.log") as server, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for n in [int(x) for x in a.tokens.split(",")]:
                text = text_of(tok, n, seed=n, lang="zh" if name == "zh-en" else "en")
                row = {"model": name, "tokens": n, **walk(browser, server, name, text),
                       **in_process(root, name, text)}
                goal = GOALS[name] if n >= 512 else None
                row["goal_s"] = goal
                rows.append(row)
                print(f"{name:22s} {n:4d} pieces  new text {row['new_text_s']:5.2f} s  first view {row['first_view_s']:5.2f} s"
                      f"  click {row['click_s']:5.2f} s (floor {row['floor_s']:4.2f} s, {row['click_s'] / row['floor_s']:.1f}×)"
                      f"  RSS +{row['rss_added_mib']:.0f} MiB  | in process: term run {row['term_run_s']:.2f} s, "
                      f"{row['term_run_mib']:.0f} MiB; a cell {row['cell_s'] * 1000:.1f} ms"
                      + (f"  goal ≤ {goal:.1f} s: {'met' if row['click_s'] <= goal else 'NOT met'}" if goal else ""),
                      flush=True)
            browser.close()
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
