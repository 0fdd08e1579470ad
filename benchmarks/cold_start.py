"""Cold start, the README's way: from `streamlit run app.py` (process start) to the first page drawn in Chromium,
and to the complete Overview with the model's output.

    python -m benchmarks.cold_start [--repeat 5] [--entry serve.py] [--before /tmp/old-main] [--no-floor] [--json out.json]

Each start is the README's command, `streamlit run app.py`, in the checkout, with two flags a benchmark needs:
--server.port (a free port, so a server left on 8501 cannot answer for it) and --server.headless true (no browser
window or e-mail prompt); OMP_NUM_THREADS, VIZ_THREADS and PYTHONDONTWRITEBYTECODE are taken out of its
environment (NOT_THE_READMES), so the app's own thread policy and Python's bytecode caches are what is measured,
as a user gets them. --entry serve.py: the class server instead; given twice
(--entry app.py --entry serve.py), the starts alternate. --before: another checkout (a clone of the old main;
given twice, two), its starts alternating with this one's, so all see the same machine load. The floors (FLOORS),
started the same way, their starts interleaved with the app's: a bare Streamlit app with one Plotly chart, and the
same with torch imported from the process start and a forward shown (what any app whose first page shows a PyTorch
model's output pays); the table ends with the app's median over each floor's (goal: drawn <= 1.25x the bare one).

Each start has a fresh browser context; the page is opened as soon as the port answers. "Drawn": the app root's
data-test-script-state has been "running" and is "notRunning" again, no stSkeleton is left, every stPlotlyChart
has its .main-svg, and two animation frames have passed (the frame holding all that was painted). "Complete":
drawn, and the model's output shown (its box, widgets.output, with text in it). Goals (medians of 5):
drawn <= 3.5 s, complete <= 5 s; drawn <= 1.25x the floor's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path

from benchmarks.stclient import free_port

ROOT = Path(__file__).resolve().parent.parent

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
GOAL_S = 3.5                    # first page drawn
GOAL_COMPLETE_S = 5.0           # the Overview with the model's output
GOAL_RATIO = 1.25               # first page drawn, over a bare app's (the first of FLOORS)
# Interleaved with the app's starts: a bare Streamlit app with one chart; the same app importing torch from its
# process start (in a thread, as the explorer's start-up load does) and showing a small model's output, the floor
# of any app whose first page shows a PyTorch model's output.
FLOORS = {"floor (a bare app, one chart)": "benchmarks/floor_apps/one_chart.py",
          "floor with torch (the same, torch imported, one forward)": "benchmarks/floor_apps/one_chart_torch.py"}
# Settings the README's command does not make, taken out of a start's environment: the thread policy is the app's
# own, and Python writes its bytecode caches (a sandbox that sets PYTHONDONTWRITEBYTECODE would compile every
# module of the app from source at each start, which no user's second start does).
NOT_THE_READMES = ("OMP_NUM_THREADS", "VIZ_THREADS", "PYTHONDONTWRITEBYTECODE")
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
  if (![...document.querySelectorAll('[class*="st-key-output_"], [data-testid="stCode"]')]
        .some(c => c.innerText.trim())) return false;""", 1)        # a code block before 901af55 (--before)
# First paint: the page shows some text (the loading note of a fresh process, a caption, or the page itself; a
# caption is a stCaptionContainer with no stMarkdownContainer in it).
PAINTED = ("() => !!document.querySelector('[data-testid=\"stMain\"] :is([data-testid=\"stMarkdownContainer\"], "
           "[data-testid=\"stCaptionContainer\"])')")
TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok"
    except OSError:
        return False


def launch(root: Path = ROOT, checkpoints=None, timeout_s: float = 120, log=None,
           entry: str = "app.py") -> tuple[subprocess.Popen, str, float]:
    """The README's command in `root` (a free port, headless, none of NOT_THE_READMES), waited for until
    /_stcore/health answers: (the process, its URL, seconds from the process start to health OK)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in NOT_THE_READMES}
    if checkpoints:                       # that root alone (VIZ_CHECKPOINTS adds to checkpoints/ otherwise)
        env.update(VIZ_CHECKPOINTS=str(checkpoints), VIZ_CHECKPOINTS_ONLY="1")
    out = open(log, "w") if log else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(["streamlit", "run", entry, "--server.port", str(port), "--server.headless", "true"],
                            cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    while not _answers(url):
        if proc.poll() is not None or time.perf_counter() - t0 > timeout_s:
            stop(proc)
            raise RuntimeError(f"streamlit did not start on {url}")
        time.sleep(0.02)
    return proc, url, time.perf_counter() - t0


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def cold_start(browser, root: Path = ROOT, checkpoints=None, timeout_s: float = 120, log=None,
               entry: str = "app.py") -> dict:
    """One cold start, timed from the process start: seconds to health OK and to the first page drawn."""
    t0 = time.perf_counter()
    proc, url, health = launch(root, checkpoints, timeout_s, log, entry)
    context = None
    try:
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
        stop(proc)


def measure(browser, repeat: int = 5, root: Path = ROOT, checkpoints=None, entry: str = "app.py") -> dict:
    """Median of `repeat` cold starts (each a new process) in `browser` (a Playwright sync Browser)."""
    return summary(entry, [cold_start(browser, root, checkpoints, entry=entry) for _ in range(repeat)])


def summary(entry: str, runs: list[dict]) -> dict:
    repeat = len(runs)
    return {"repeat": repeat, "entry": entry, "health_s": statistics.median(r["health_s"] for r in runs),
            "painted_s": statistics.median(r["painted_s"] for r in runs),
            "drawn_s": statistics.median(r["drawn_s"] for r in runs),
            "complete_s": statistics.median(r["complete_s"] for r in runs), "goal_s": GOAL_S,
            "goal_complete_s": GOAL_COMPLETE_S, "met": statistics.median(r["drawn_s"] for r in runs) <= GOAL_S,
            "complete_met": statistics.median(r["complete_s"] for r in runs) <= GOAL_COMPLETE_S, "runs": runs}


def table(r: dict) -> str:
    lines = [f"streamlit run {r.get('entry', 'app.py')}",
             f"{'start':>6} {'health OK':>10} {'first text':>11} {'page drawn':>11} {'charts':>7} {'complete':>9}"
             "   (s from process start)"]
    for i, x in enumerate(r["runs"], 1):
        lines.append(f"{i:>6} {x['health_s']:>10.2f} {x['painted_s']:>11.2f} {x['drawn_s']:>11.2f} {x['plotly_charts']:>7}"
                     f" {x['complete_s']:>9.2f}")
    lines.append(f"{'median':>6} {r['health_s']:>10.2f} {r['painted_s']:>11.2f} {r['drawn_s']:>11.2f} {'':>7}"
                 f" {r['complete_s']:>9.2f}   goals: drawn <= {r['goal_s']:g} s {'met' if r['met'] else 'MISSED'},"
                 f" complete <= {r['goal_complete_s']:g} s {'met' if r['complete_met'] else 'MISSED'}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--entry", action="append", help="what `streamlit run` is given: app.py (default) or serve.py; "
                   "twice: alternate")
    p.add_argument("--checkpoints", help="VIZ_CHECKPOINTS for the server (default: checkpoints/)")
    p.add_argument("--before", action="append", default=[], help="another checkout (e.g. /tmp/old-main; more than "
                   "one: each): its starts alternate with this one's, so all see the same machine load")
    p.add_argument("--no-floor", action="store_true", help="leave out the bare app's starts")
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright
    before = [Path(b).resolve() for b in args.before]
    roots = {f"before ({b}): ": b for b in before} | {(f"after ({ROOT}): " if before else ""): ROOT}
    entries = args.entry or ["app.py"]
    if not args.no_floor:
        roots |= {f"{name}: ": ROOT for name in FLOORS}
    runs = {(w, e): [] for w in roots for e in entries}
    floor_entry = {f"{name}: ": path for name, path in FLOORS.items()}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(args.repeat):
            for e in entries:
                for w, root in roots.items():
                    runs[w, e].append(cold_start(browser, root, args.checkpoints, entry=floor_entry.get(w, e)))
        browser.close()
    results = [summary(floor_entry.get(w, e), r) for (w, e), r in runs.items()]
    print("\n\n".join(w + table(r) for (w, e), r in zip(runs, results)))
    if not args.no_floor:
        floors = {w: r for (w, e), r in zip(runs, results) if w in floor_entry}
        for (w, e), r in zip(runs, results):
            if w in floor_entry:
                continue
            r["floor_ratios"] = {}
            for i, (fw, f) in enumerate(floors.items()):
                r["floor_ratios"][fw.rstrip(": ")] = ratio = r["drawn_s"] / f["drawn_s"]
                goal = f" (goal <= {GOAL_RATIO:g}x: {'met' if ratio <= GOAL_RATIO else 'MISSED'})" if i == 0 else ""
                print(f"{w}{e}: drawn {r['drawn_s']:.2f} s / {fw.rstrip(': ')}'s {f['drawn_s']:.2f} s = {ratio:.2f}x{goal}")
        bare, torch_floor = floors.values()
        print(f"the floors: with torch / bare = {torch_floor['drawn_s'] / bare['drawn_s']:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(results if len(results) > 1 else results[0], indent=1), encoding="utf-8")

if __name__ == "__main__":
    main()
