"""End-to-end: the real `streamlit run app.py` server driven by Debian's chromium through Playwright.

Types a Chinese sentence, opens every page, clicks a model-view tile, steps decoding three times,
and saves a screenshot per page under test-artifacts/ (look at them).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from browser_util import ARTIFACTS, CHROMIUM, charts, hover, no_exception, open_page, settle

SENTENCE = "他是我的朋友。"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)")]


def test_explorer_end_to_end(server, page):
    url, root = server
    pg = page
    pg.goto(url)
    pg.get_by_role("heading", name="Overview").first.wait_for()
    settle(pg)
    if root.name == "checkpoints":    # the real translator opens by default
        assert "enc-dec · 3+3 layers" in pg.locator('[data-testid="stSidebar"]').inner_text()
    else:                             # tiny checkpoints: pick the translator explicitly
        pg.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        pg.get_by_role("option", name="tiny-zh-en").click()
        settle(pg)

    box = pg.locator('[data-testid="stSidebar"] textarea')
    box.fill(SENTENCE)
    box.press("Control+Enter")
    settle(pg)
    main = pg.locator('[data-testid="stMain"]')
    # the pieces table shows the typed sentence's pieces; the translation box is filled
    assert pg.get_by_text("Your text as pieces").is_visible()
    # the pieces tables (page_parts.table): each header cell stands over its column's cells
    columns = pg.evaluate("""() => [...document.querySelectorAll('.vt-table')].filter(t => t.offsetWidth).map(t => {
        const x = cells => [...cells].map(c => Math.round(c.getBoundingClientRect().left));
        return [x(t.querySelectorAll('[role=columnheader]')),
                x(t.querySelector('[role=rowgroup]:last-child [role=row]').querySelectorAll('[role=cell]'))]; })""")
    assert all(head == row for head, row in columns) and sum(len(head) == 5 for head, _ in columns) == 2, columns
    assert pg.locator('.st-key-output_overview').inner_text().strip()
    pg.screenshot(path=str(ARTIFACTS / "1-overview.png"))
    no_exception(pg)

    open_page(pg, "Attention: heads and layers")
    assert charts(pg) == 3
    assert "encoder self-attention, layer 0, head 0" in main.inner_text()
    # a click near the bottom-right of the model view opens the last layer's last head
    view = pg.locator('[data-testid="stPlotlyChart"]').nth(1)
    bb = view.locator(".nsewdrag").first.bounding_box()
    hover(pg, view, bb["x"] + bb["width"] * 0.97, bb["y"] + bb["height"] * 0.97)
    pg.mouse.click(bb["x"] + bb["width"] * 0.97, bb["y"] + bb["height"] * 0.97)
    settle(pg)
    assert "encoder self-attention, layer 0, head 0" not in main.inner_text()
    pg.screenshot(path=str(ARTIFACTS / "2-attention.png"))
    no_exception(pg)

    # tabbed pages draw the open tab only; a click on another tab runs and draws that one
    for n, title, at_least, tab, then in [(3, "Attention step by step", 3, "2 · Scores, mask, softmax", 4),
                                          (4, "Masks", 1, "What each head applied", 4),
                                          (5, "Positional encoding", 3, None, 0)]:
        open_page(pg, title)
        assert charts(pg) >= at_least
        if tab:
            pg.get_by_role("tab", name=tab).click()
            settle(pg)
            assert charts(pg) == then
        pg.screenshot(path=str(ARTIFACTS / f"{n}-{title.lower().replace(' ', '-')}.png"))
        no_exception(pg)

    open_page(pg, "Step-through decoding")
    assert pg.get_by_text("Step 0 of").is_visible()
    for i in range(1, 4):
        pg.get_by_role("button", name=re.compile("Next")).click()
        pg.get_by_text(f"Step {i} of").wait_for()
        settle(pg)
    assert charts(pg) >= 2            # candidates + cross- and self-attention of the newest query
    assert "[begin]" in pg.locator('.st-key-output_sequence').inner_text()
    pg.screenshot(path=str(ARTIFACTS / "6-decoding.png"))
    no_exception(pg)
    # Play advances on its own; Pause stops it. From step 0, so that a Pause the loaded machine delivers a few
    # steps late (each rerun sleeps 0.8 s, then a click must reach the server) still lands before the end
    total = int(re.search(r"Step 3 of (\d+)", main.inner_text()).group(1))
    play, pause = (pg.get_by_role("button", name=re.compile(n)) for n in ("Play", "Pause"))
    paused = None
    for _ in range(3):        # under the suite's heaviest load a Pause can reach the server after Play's last step
        pg.get_by_role("button", name=re.compile("Start")).click()                # start again, at most three times
        pg.get_by_text(f"Step 0 of {total}").wait_for()
        settle(pg)
        play.click()
        pg.get_by_text(re.compile(rf"Step [1-9]\d* of {total}")).wait_for()   # its steps on its own
        # one click: Play replaces Pause on the same spot, so a second click, made because the first seemed lost on
        # a loaded machine, can land on Play and play again (a paused page would then move on)
        try:
            pause.click(timeout=10_000)
        except PlaywrightTimeout:         # Pause gone before the click: Play reached the end first (start again)
            pass
        play.wait_for(timeout=60_000)     # paused (Play), or the end reached first (Play drawn disabled)
        settle(pg)
        step = int(re.search(r"Step (\d+) of", main.inner_text()).group(1))
        if step < total:
            paused = str(step)
            break
    assert paused is not None, "Play ran to the end three times: Pause did not stop it"
    pg.wait_for_timeout(2500)                               # three times Play's 0.8 s between steps
    assert re.search(r"Step (\d+) of", main.inner_text()).group(1) == paused, "Pause did not stop it"
    no_exception(pg)
