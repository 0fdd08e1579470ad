"""One wait for a page in a real browser: the script has finished, nothing is loading and every chart is drawn."""
from __future__ import annotations

from test_browser import NO_PREVIEW

READY = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
         " return a && a.getAttribute('data-test-script-state') === 'notRunning'"
         " && !document.querySelector('[data-testid=\"stSkeleton\"]')"
         " && !document.querySelector('[data-testid=\"stSpinner\"]') && " + NO_PREVIEW +
         " && Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"]'))"
         ".every(c => c.querySelector('.main-svg')); }")


def open_drawn(pg, url: str) -> str:
    """Open url, wait until it is drawn (plotly lays out after the script: a short pause), check that no
    exception is shown; returns the main column's text."""
    pg.goto(url)
    pg.wait_for_function(READY)
    pg.wait_for_timeout(800)
    assert pg.locator('[data-testid="stException"]').count() == 0, url
    return pg.locator('[data-testid="stMain"]').inner_text()


def click_until(target, done, tries: int = 3, wait_ms: int = 15_000) -> int:
    """Click `target` until `done` (a locator) shows; returns how many clicks were lost. On a page with a fragment
    that reruns by itself (the teacher's live chart, every TEACHER_EVERY s), Streamlit 1.67 can lose a click that
    lands during the fragment's run: the full rerun it asks for starts beside the stopping fragment run, whose
    clean-up resets the button's trigger. A teacher then clicks again; so does this, at most `tries` times."""
    from playwright.sync_api import TimeoutError as Timeout
    for lost in range(tries):
        target.click()
        try:
            done.wait_for(timeout=wait_ms)
            return lost
        except Timeout:
            pass
    done.wait_for()
    return tries
