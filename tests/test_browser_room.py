"""The app on a room's screens, in the real server and Chromium: on a projector (1920×1080, ?present=1) a small
heatmap is drawn several times larger, its cells and its fonts alike, and stays legible (tests/legibility.js);
on a laptop (1366×768) the Overview's "Open a block" links are read whole in both languages.
Screenshots under test-artifacts/presenter/ (look at them)."""
from __future__ import annotations

import urllib.parse

import pytest

from browser_util import ARTIFACTS, CHROMIUM, settle, still
from viz_explorer.kit import presenter

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
OUT = ARTIFACTS / "presenter"
MEASURER = (ARTIFACTS.parent / "tests" / "legibility.js").read_text(encoding="utf-8")
TEXT = "我爱你"           # a few pieces: a small heatmap (its pieces are the model's; none is named here)
HEATMAP = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].findIndex(c => c.querySelector('.hm'))"""
# The first heatmap's plot area, its drawn chart, and its tick-label and title font sizes.
MEASURE = """(i) => { const c = document.querySelectorAll('[data-testid="stPlotlyChart"]')[i];
  const box = e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; };
  const px = sel => parseFloat(getComputedStyle(c.querySelector(sel)).fontSize);
  return {plot: box(c.querySelector('.nsewdrag')), chart: box(c.querySelector('.main-svg')), tick: px('.xtick text'),
          ytick: px('.ytick text'), title: px('.gtitle'), rows: c.querySelectorAll('.ytick').length}; }"""


@pytest.fixture()
def tab(page):       # noqa: F811
    OUT.mkdir(parents=True, exist_ok=True)
    context = page.context.browser.new_context(viewport={"width": 1920, "height": 1080})
    yield context.new_page()
    context.close()


def _heatmap(tab, url: str, present: bool, lang: str = "en") -> tuple[int, dict]:
    tab.goto(f"{url}/attention?text={urllib.parse.quote(TEXT)}&lang={lang}" + ("&present=1" if present else ""))
    tab.wait_for_function("() => document.querySelector('[data-testid=\"stPlotlyChart\"] .hm')")
    settle(tab)
    i = tab.evaluate(HEATMAP)
    return i, tab.evaluate(MEASURE, i)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_presented_heatmap_fills_the_projector(server, tab, lang):     # noqa: F811
    url, _ = server
    _, small = _heatmap(tab, url, present=False, lang=lang)
    i, big = _heatmap(tab, url, present=True, lang=lang)
    assert big["rows"] == small["rows"] <= 8, (small, big)                # the same small matrix
    grow = big["plot"]["w"] / small["plot"]["w"]
    assert grow >= 2.5 and big["plot"]["w"] >= 400, (small, big)          # cells 2.5× wider or more
    assert big["plot"]["h"] / small["plot"]["h"] == pytest.approx(grow, rel=0.03)          # still square
    for k in ("tick", "ytick", "title"):                                   # its type grows as much as its cells
        assert big[k] / small[k] == pytest.approx(grow, rel=0.1), (k, small, big)
    assert big["chart"]["w"] <= 1920 - 2 * 5 * presenter.FONT_PX + 2                        # in the main column
    assert big["chart"]["h"] <= 1080 - 3.75 * presenter.FONT_PX                             # and a screen high
    chart = tab.locator('[data-testid="stPlotlyChart"]').nth(i)
    chart.scroll_into_view_if_needed()
    still(tab)
    tab.screenshot(path=str(OUT / f"heatmap-{lang}-1920x1080.png"))
    report = tab.evaluate(MEASURER, {"tol": grow})[i]     # the rules hold, zoomed (their 1 px tolerance with it)
    assert not report["problems"], report["problems"]
    assert tab.locator('[data-testid="stException"]').count() == 0


# The label of each page link against the box that clips it: the text's ink must end inside.
CUT = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stPageLink"]')].map(l => {
  const p = l.querySelector('p'), clip = p.closest('span') || l, r = document.createRange(); r.selectNodeContents(p);
  return [p.innerText, Math.round(r.getBoundingClientRect().right - clip.getBoundingClientRect().right),
          Math.round(r.getBoundingClientRect().right - l.closest('[data-testid="stColumn"]').getBoundingClientRect().right)]; })"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_overview_links_are_whole_on_a_laptop(server, tab, lang):     # noqa: F811
    url, _ = server
    tab.set_viewport_size({"width": 1366, "height": 768})
    tab.goto(f"{url}/?lang={lang}")
    tab.locator('[data-testid="stMain"] [data-testid="stPageLink"]').first.wait_for()
    settle(tab)
    links = tab.evaluate(CUT)
    assert len(links) >= 6, links
    cut = [(text, over, col) for text, over, col in links if over > 1 or col > 1]
    assert not cut, cut                             # (label, px past its box, px past its column)
    tab.screenshot(path=str(OUT / f"overview-links-{lang}-1366x768.png"))
