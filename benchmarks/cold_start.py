"""Cold start: from `streamlit run app.py` (process start) to the first page drawn in Chromium (issue 12), and to
the full Overview with the model's output (issue 25).

    python benchmarks/cold_start.py [--repeat 5] [--entry serve.py] [--before ../old-main] [--json out.json]

--entry: the file given to `streamlit run`: app.py (everything loads on the first visit) or serve.py (the
class server: st.App's lifespan starts torch and the default model before the first visitor, issue 25).
Given twice (--entry app.py --entry serve.py), the starts alternate, so both see the same machine load.

Each start is a new server process (stclient.Server's command line, OMP_NUM_THREADS=1) and a fresh browser
context. The page is opened as soon as the port answers. "Drawn": the app root's data-test-script-state has
been "running" and is "notRunning" again, no stSkeleton is left, every stPlotlyChart has its .main-svg, and
two animation frames have passed (the frame holding all that was painted). Goal: <= 3.5 s (issue 25),
the median of 5. On a fresh process that is the Overview's preview (viz_explorer/startup/preview.py: what needs no
model, with a note that it is loading); "Complete": drawn as above, and the model's output is shown (a code
block with text in it: the preview has none), which the preview becomes by itself.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from stclient import free_port  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
GOAL_S = 3.5
# Records every value the script-state attribute takes, from before the app's first byte of JS runs.
WATCH = """
window.__states = [];
new MutationObserver(ms => { for (const m of ms) window.__states.push(m.target.getAttribute('data-test-script-state')); })
  .observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
"""
DRAWN = """() => {
  const root = document.querySelector('[data-test-script-state]');
  if (!root || !window.__states.includes('running') || root.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid="stSkeleton"]')) return false;
  return [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'));
}"""
COMPLETE = DRAWN.replace("() => {", """() => {
  if (![...document.querySelectorAll('[data-testid="stCode"]')].some(c => c.innerText.trim())) return false;""", 1)
# First paint: the page shows some text (the loading note of a fresh process, or the page itself).
PAINTED = "() => !!document.querySelector('[data-testid=\"stMain\"] [data-testid=\"stMarkdownContainer\"]')"
TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok"
    except OSError:
        return False


def cold_start(browser, root: Path = ROOT, checkpoints=None, timeout_s: float = 120, log=None,
               entry: str = "app.py") -> dict:
    """One cold start, timed from the process start: seconds to health OK and to the first page drawn."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if checkpoints:
        env["VIZ_CHECKPOINTS"] = str(checkpoints)
    out = open(log, "w") if log else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", entry, "--server.headless", "true",
                             "--server.address", "127.0.0.1", "--server.port", str(port)],
                            cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    context = None
    try:
        while not _answers(url):
            if proc.poll() is not None or time.perf_counter() - t0 > timeout_s:
                raise RuntimeError(f"streamlit did not start on {url}")
            time.sleep(0.02)
        health = time.perf_counter() - t0
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.add_init_script(WATCH)
        page.goto(url, wait_until="commit")
        page.wait_for_function(PAINTED, polling=20, timeout=timeout_s * 1000)
        painted = time.perf_counter() - t0
        page.wait_for_function(DRAWN, polling=20, timeout=timeout_s * 1000)
        page.evaluate(TWO_FRAMES)
        drawn = time.perf_counter() - t0
        charts = page.locator('[data-testid="stPlotlyChart"]').count()
        page.wait_for_function(COMPLETE, polling=20, timeout=timeout_s * 1000)
        page.evaluate(TWO_FRAMES)
        complete = time.perf_counter() - t0
        return {"health_s": health, "painted_s": painted, "drawn_s": drawn, "plotly_charts": charts,
                "complete_s": complete}
    finally:
        if context is not None:
            context.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def measure(browser, repeat: int = 5, root: Path = ROOT, checkpoints=None, entry: str = "app.py") -> dict:
    """Median of `repeat` cold starts (each a new process) in `browser` (a Playwright sync Browser)."""
    return summary(entry, [cold_start(browser, root, checkpoints, entry=entry) for _ in range(repeat)])


def summary(entry: str, runs: list[dict]) -> dict:
    repeat = len(runs)
    return {"repeat": repeat, "entry": entry, "health_s": statistics.median(r["health_s"] for r in runs),
            "painted_s": statistics.median(r["painted_s"] for r in runs),
            "drawn_s": statistics.median(r["drawn_s"] for r in runs),
            "complete_s": statistics.median(r["complete_s"] for r in runs), "goal_s": GOAL_S,
            "met": statistics.median(r["drawn_s"] for r in runs) <= GOAL_S, "runs": runs}


def table(r: dict) -> str:
    lines = [f"streamlit run {r.get('entry', 'app.py')}",
             f"{'start':>6} {'health OK':>10} {'first text':>11} {'page drawn':>11} {'charts':>7} {'complete':>9}"
             "   (s from process start)"]
    for i, x in enumerate(r["runs"], 1):
        lines.append(f"{i:>6} {x['health_s']:>10.2f} {x['painted_s']:>11.2f} {x['drawn_s']:>11.2f} {x['plotly_charts']:>7}"
                     f" {x['complete_s']:>9.2f}")
    lines.append(f"{'median':>6} {r['health_s']:>10.2f} {r['painted_s']:>11.2f} {r['drawn_s']:>11.2f} {'':>7}"
                 f" {r['complete_s']:>9.2f}   goal: page drawn <= {r['goal_s']:g} s: {'met' if r['met'] else 'MISSED'}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--entry", action="append", help="what `streamlit run` is given: app.py (default) or serve.py; "
                   "twice: alternate")
    p.add_argument("--checkpoints", help="VIZ_CHECKPOINTS for the server (default: checkpoints/)")
    p.add_argument("--before", help="another checkout (e.g. ../old-main): its starts alternate with this one's, so "
                   "both see the same machine load")
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright
    roots = {"": ROOT} if not args.before else {"before: ": Path(args.before).resolve(), "this checkout: ": ROOT}
    entries = args.entry or ["app.py"]
    runs = {(w, e): [] for w in roots for e in entries}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(args.repeat):
            for e in entries:
                for w, root in roots.items():
                    runs[w, e].append(cold_start(browser, root, args.checkpoints, entry=e))
        browser.close()
    results = [summary(e, r) for (w, e), r in runs.items()]
    print("\n\n".join(w + table(r) for (w, e), r in zip(runs, results)))
    if args.json:
        Path(args.json).write_text(json.dumps(results if len(results) > 1 else results[0], indent=1), encoding="utf-8")

if __name__ == "__main__":
    main()
