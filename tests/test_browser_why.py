"""In Chromium against the real server: on a 390×844 phone a student taps a cell of the head's heatmap on "Why this
attention" (the first tap names the cell, the second picks it, as Plotly's touch handling goes), and the page splits
that cell's score; on a laptop, in Chinese, a click does the same. What the page says is checked against score_terms
on a full run of the same text; the views are saved under test-artifacts/why/ (look at them)."""
from __future__ import annotations

import os
from urllib.parse import urlencode

import pytest

from app_util import ROOT
from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, app_server, no_exception, settle, still
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH
from viz_transformer import load_checkpoint
from viz_transformer.analysis import why_attention as why
from viz_transformer.analysis.score_terms import full_run, score_terms

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
SHOTS = ARTIFACTS / "why"
TEXT = "我是一名工程师。"
PHONE_UA = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            "Version/17.5 Mobile/15E148 Safari/604.1")
AXES = """c => { const gd = c.querySelector('.js-plotly-plot');
                 return [gd.layout.xaxis.range, gd.layout.yaxis.range]; }"""


@pytest.fixture(scope="module")
def server():
    with app_server(ROOT / "checkpoints", "server-why.log") as url:
        yield url


def cell_xy(chart, i: int, j: int) -> tuple[float, float]:
    """The page position of cell (row i, column j) of a heatmap from its axes' ranges (row 0 on top)."""
    box = chart.locator(".nsewdrag").first.bounding_box()
    (x0, x1), (bottom, top) = chart.evaluate(AXES)
    return box["x"] + (j - x0) / (x1 - x0) * box["width"], box["y"] + (i - top) / (bottom - top) * box["height"]


@pytest.mark.parametrize("lang, screen", [("en", "phone"), ("zh", "laptop")])
def test_a_tapped_cell_is_split_and_said(server, lang, screen):
    from playwright.sync_api import sync_playwright
    table = ZH if lang == "zh" else EN
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en")
    run = full_run(hm, TEXT)
    q, k = 4, 5                                   # "▁an → ▁engineer" against 程, layer 0, head 0: the page's first head
    t = score_terms(hm, run, "decoder.cross_attn", 0, 0, q, k)
    s = why.story(t)
    SHOTS.mkdir(parents=True, exist_ok=True)
    phone = screen == "phone"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        kw = dict(user_agent=PHONE_UA, is_mobile=True, has_touch=True) if phone else {}
        context = browser.new_context(viewport={"width": 390, "height": 844} if phone else {"width": 1366, "height": 768},
                                      **kw)
        pg = context.new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        pg.goto(f"{server}/why?" + urlencode({"checkpoint": "zh-en", "text": TEXT, "lang": lang}))
        settle(pg)
        still(pg)
        no_exception(pg)
        chart = pg.locator('[data-testid="stPlotlyChart"]').first
        chart.scroll_into_view_if_needed()
        still(pg)
        x, y = cell_xy(chart, q, k)
        if phone:
            pg.touchscreen.tap(x, y)
            chart.locator(".hoverlayer text").first.wait_for()            # the first tap names the cell ...
            assert f"{q}:" in chart.locator(".hoverlayer").first.evaluate("e => e.textContent")
            pg.wait_for_timeout(600)                 # past Plotly's double-click delay (300 ms): two taps, not one double
            pg.touchscreen.tap(x, y)                                        # ... the second picks it
        else:
            pg.mouse.click(x, y)
        pg.wait_for_function(f"""() => document.querySelector('[data-testid="stMain"]').innerText
                                 .includes('{t.score:.2f}')""")
        settle(pg)
        still(pg)
        no_exception(pg)
        main = pg.locator('[data-testid="stMain"]').inner_text()
        title = table["wy.terms_title"].format(qp=run.tgt_pieces[q], kp=run.src_pieces[k], score=t.score,
                                              weight=float(run.cache["decoder.0.cross_attn.hook_pattern"][0, 0, q, k]))
        assert "".join(title.split()) in "".join(main.split())          # a phone wraps the figure's title
        assert f"{s.value:+.2f}" in main and f"{s.position:+.2f}" in main
        assert table["wy.check"].format(total=t.total(), score=t.score) in main
        pg.set_viewport_size({"width": 390 if phone else 1366, "height": 3000})
        still(pg)
        pg.screenshot(path=str(SHOTS / f"tapped-{lang}-{screen}.png"), full_page=True)
        context.close()
        browser.close()
