"""Cold start: from `streamlit run app.py` (process start) to the first page fully drawn in Chromium (issue 12).

    python benchmarks/cold_start.py [--repeat 3] [--json out.json]

Each start is a new server process (stclient.Server's command line, OMP_NUM_THREADS=1) and a fresh browser
context. The page is opened as soon as the port answers. "Drawn": the app root's data-test-script-state has
been "running" and is "notRunning" again, no stSkeleton is left, every stPlotlyChart has its .main-svg, and
two animation frames have passed (the frame holding all that was painted). Goal: <= 5 s.
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
GOAL_S = 5.0
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
TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok"
    except OSError:
        return False


def cold_start(browser, root: Path = ROOT, checkpoints=None, timeout_s: float = 120, log=None) -> dict:
    """One cold start, timed from the process start: seconds to health OK and to the first page drawn."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if checkpoints:
        env["VIZ_CHECKPOINTS"] = str(checkpoints)
    out = open(log, "w") if log else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
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
        page.wait_for_function(DRAWN, polling=20, timeout=timeout_s * 1000)
        page.evaluate(TWO_FRAMES)
        drawn = time.perf_counter() - t0
        charts = page.locator('[data-testid="stPlotlyChart"]').count()
        return {"health_s": health, "drawn_s": drawn, "plotly_charts": charts}
    finally:
        if context is not None:
            context.close()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def measure(browser, repeat: int = 3, root: Path = ROOT, checkpoints=None) -> dict:
    """Median of `repeat` cold starts (each a new process) in `browser` (a Playwright sync Browser)."""
    runs = [cold_start(browser, root, checkpoints) for _ in range(repeat)]
    return {"repeat": repeat, "health_s": statistics.median(r["health_s"] for r in runs),
            "drawn_s": statistics.median(r["drawn_s"] for r in runs), "goal_s": GOAL_S,
            "met": statistics.median(r["drawn_s"] for r in runs) <= GOAL_S, "runs": runs}


def table(r: dict) -> str:
    lines = [f"{'start':>5} {'process -> health OK':>21} {'process -> first page drawn':>28} {'charts':>7}"]
    for i, x in enumerate(r["runs"], 1):
        lines.append(f"{i:>5} {x['health_s']:>19.2f} s {x['drawn_s']:>26.2f} s {x['plotly_charts']:>7}")
    lines.append(f"{'median':>6}{r['health_s']:>18.2f} s {r['drawn_s']:>26.2f} s   (goal <= {r['goal_s']:.0f} s: "
                 f"{'met' if r['met'] else 'MISSED'})")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--checkpoints", help="VIZ_CHECKPOINTS for the server (default: checkpoints/)")
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        r = measure(browser, args.repeat, ROOT, args.checkpoints)
        browser.close()
    print(table(r))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
