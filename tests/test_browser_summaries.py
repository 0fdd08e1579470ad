"""End-to-end in headless chromium: head statistics (click a grid cell -> the attention page opens that head),
rollout, and the report downloaded from the Export page, then opened offline (no network) and drawn.

Screenshots go to test-artifacts/ (look at them).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_util import ARTIFACTS, CHROMIUM, hover, no_exception, open_page, settle

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


def test_summaries_and_an_offline_report(server, page, tmp_path):  # noqa: F811
    url, root = server
    pg = page
    pg.goto(url)
    pg.get_by_role("heading", name="Overview").first.wait_for()
    settle(pg)
    if root.name != "checkpoints":
        pg.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        pg.get_by_role("option", name="tiny-zh-en").click()
        settle(pg)
    main = pg.locator('[data-testid="stMain"]')

    open_page(pg, "Rollout and attribution")
    pg.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    assert pg.locator('[data-testid="stPlotlyChart"]').count() == 3
    pg.screenshot(path=str(ARTIFACTS / "s1-rollout.png"))
    no_exception(pg)

    open_page(pg, "Head statistics")
    pg.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    assert pg.locator('[data-testid="stDataFrame"]').count() == 1
    pg.screenshot(path=str(ARTIFACTS / "s2-head-stats.png"))
    # the cross-attention grid (third): a click on its bottom-right cell opens the last layer's last head
    cross = pg.locator('[data-testid="stPlotlyChart"]').nth(2)
    grid = cross.locator(".nsewdrag").first
    grid.scroll_into_view_if_needed()
    bb = grid.bounding_box()
    x, y = bb["x"] + bb["width"] * 0.97, bb["y"] + bb["height"] * 0.9
    hover(pg, cross, x, y)
    pg.mouse.click(x, y)
    pg.get_by_role("heading", name="Attention: heads and layers").first.wait_for()
    settle(pg)
    assert "cross-attention (decoder → encoder), layer" in main.inner_text()
    assert ", layer 0, head 0" not in main.inner_text()
    pg.screenshot(path=str(ARTIFACTS / "s3-opened-head.png"))
    no_exception(pg)

    open_page(pg, "Export and report")
    with pg.expect_download() as dl:
        pg.get_by_role("button", name="Download the report (.html)").click()
    report = tmp_path / "report.html"
    dl.value.save_as(report)
    assert 4_800_000 < report.stat().st_size < 5_000_000
    pg.screenshot(path=str(ARTIFACTS / "s4-export.png"))

    # the report alone, offline: every request that is not the file itself is refused
    ctx = pg.context.browser.new_context(offline=True, viewport={"width": 1200, "height": 1000})
    asked = []

    def refuse(route):
        asked.append(route.request.url)
        return route.continue_() if route.request.url.startswith("file:") else route.abort()
    ctx.route("**/*", refuse)
    rp = ctx.new_page()
    errors = []
    rp.on("pageerror", lambda e: errors.append(str(e)))
    rp.goto(report.as_uri())
    rp.wait_for_function("() => document.body.dataset.figures !== undefined")
    n = int(rp.evaluate("document.body.dataset.figures"))
    assert n >= 5 and rp.locator(".figure .main-svg").count() >= n       # each figure drew its svg
    assert rp.locator(".figure .hm image").count() == n                   # and its heatmap image
    assert not errors and all(u.startswith("file:") for u in asked)
    rp.screenshot(path=str(ARTIFACTS / "s5-report.png"), full_page=True)
    ctx.close()
