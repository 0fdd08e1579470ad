"""Does a click get lost while a fragment reruns by itself (run_every)? Four minimal Streamlit apps (a button beside a
fragment that is busy most of the time, a button inside it, a button handled inline on a page that takes a while, a
segmented control whose value a store sets on every run, as the teacher's question mode) and the real teacher page
(Start a class, then Next / Previous step). Each click is made once, at a given pace, in Chromium; a click is lost
when its effect does not show within 8 s. Prints the clicks lost per app. --busy: one busy loop per core beside.

    python -m benchmarks.lost_clicks                    # 40 clicks per app, 0.9 s apart; the teacher page 30, 0.2 s
    python -m benchmarks.lost_clicks --clicks 100 --pace 0.3 --busy
"""
from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.busy import BusyLoops

ROOT = Path(__file__).resolve().parent.parent
APPS = ROOT / "benchmarks" / "click_apps"
CHROMIUM = "/usr/bin/chromium"


def minimal(app: Path, n: int, pace: float, browser) -> int:
    from benchmarks.stclient import free_port
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
                             "--server.port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pg = browser.new_page()
        for _ in range(120):
            try:
                pg.goto(f"http://127.0.0.1:{port}")
                break
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.5)
        pg.get_by_text("clicks: 0").wait_for(timeout=60_000)
        for _ in range(n):
            pg.get_by_role("button", name="Next").or_(pg.locator('[role="radio"][aria-checked="false"]')).click()
            time.sleep(pace)
        time.sleep(3)
        shown = [int(x) for x in re.findall(r"clicks: (\d+)", pg.locator("body").inner_text())]
        pg.close()
        return n - shown[-1]                # negative: a click counted twice
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def teacher(n: int, pace: float, browser) -> int:
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
    from benchmarks.stclient import Server
    from test_browser_class import N_STEPS, _ready
    with Server(ROOT, ROOT / "checkpoints", log="/tmp/lost_clicks_server.log",
                env={"VIZ_DATA": tempfile.mkdtemp()}) as srv:
        pg = browser.new_context(viewport={"width": 1300, "height": 1500}).new_page()
        pg.set_default_timeout(120_000)
        pg.goto(f"{srv.url}/live_class")
        _ready(pg)
        pg.get_by_role("button", name="Start a class").click()
        _ready(pg)
        main, step, lost = pg.locator('[data-testid="stMain"]'), 1, 0
        for _ in range(n):
            want = step + 1 if step < 3 else step - 1
            pg.get_by_role("button", name="Next step" if want > step else "Previous step").click()
            try:
                main.get_by_text(f"Step {want} of {N_STEPS}", exact=True).first.wait_for(timeout=8000)
                step = want
            except Exception:  # noqa: BLE001 - lost: read where the class is
                lost += 1
                shown = [k for k in range(1, N_STEPS + 1)
                         if main.get_by_text(f"Step {k} of {N_STEPS}", exact=True).count()]
                step = shown[0] if shown else step
            time.sleep(pace)
        return lost


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clicks", type=int, default=40)
    p.add_argument("--pace", type=float, default=0.9, help="seconds between two clicks on the minimal apps")
    p.add_argument("--teacher-clicks", type=int, default=30)
    p.add_argument("--teacher-pace", type=float, default=0.2)
    p.add_argument("--busy", action="store_true", help="one busy-loop process per core beside (benchmarks/busy.py)")
    a = p.parse_args(argv)
    import streamlit
    from playwright.sync_api import sync_playwright
    print(f"streamlit {streamlit.__version__}" + (", one busy loop per core beside" if a.busy else ""), flush=True)
    with sync_playwright() as pw, (BusyLoops() if a.busy else contextlib.nullcontext()):
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        total = 0
        for app in sorted(APPS.glob("*.py")):
            lost = minimal(app, a.clicks, a.pace, browser)
            total += abs(lost)
            print(f"{app.stem:>24}: {a.clicks} clicks, " + (f"{lost} lost" if lost >= 0 else f"{-lost} counted twice"),
                  flush=True)
        lost = teacher(a.teacher_clicks, a.teacher_pace, browser)
        total += lost
        print(f"{'the teacher page':>24}: {a.teacher_clicks} clicks, {lost} lost", flush=True)
        browser.close()
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
