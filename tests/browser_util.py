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
