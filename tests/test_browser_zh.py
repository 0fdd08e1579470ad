"""The Chinese interface in a real browser: the real server, Debian's chromium with fonts-noto-cjk, every
page opened through its address with ?lang=zh; a screenshot of each under test-artifacts/zh/ (look at them)."""
from __future__ import annotations

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM, settle
from viz_explorer.kit.strings_zh import ZH

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]

PAGES = [("overview", "ov", "nav.overview"), ("attention", "at", "nav.attention"), ("masks", "mk", "nav.masks"),
         ("positional", "pe", "nav.positional"), ("step_by_step", "st", "nav.steps"),
         ("decoding", "dc", "nav.decoding"), ("knockout", "ko", "nav.knockout"), ("positions", "po", "nav.positions"),
         ("compare", "cp", "nav.compare"), ("architectures", "ar", "nav.architectures"),
         ("rollout", "ro", "nav.rollout"), ("head_stats", "hs", "nav.stats"), ("training", "tr", "nav.training"),
         ("export", "ex", "nav.export")]
WAIT_MS = 240_000      # a cold page (model load, padded batch) on two cores shared with training jobs


def test_every_page_in_chinese(server):  # noqa: F811
    """Opened once with ?lang=zh, then page by page through the Chinese sidebar (the language stays)."""
    from playwright.sync_api import sync_playwright
    url, root = server
    out = ARTIFACTS / "zh"
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1440, "height": 1600})
        pg.set_default_timeout(WAIT_MS)
        pg.goto(f"{url}/?lang=zh")
        for n, (path, key, nav) in enumerate(PAGES):
            if n:
                pg.locator('[data-testid="stSidebarNav"]').get_by_text(ZH[nav], exact=True).click()
            pg.get_by_role("heading", name=ZH[f"{key}.title"]).first.wait_for()
            settle(pg, WAIT_MS)
            assert pg.locator('[data-testid="stException"]').count() == 0, path
            sidebar = pg.locator('[data-testid="stSidebar"]').inner_text()
            for section in ("nav.sec.look", "nav.sec.step", "nav.sec.experiment", "nav.sec.train", "sidebar.text"):
                assert ZH[section] in sidebar
            assert "lang=zh" in pg.url                       # the address stays a shareable Chinese link
            if key == "ov":                                  # the diagram is drawn with Chinese block names
                drawn = pg.locator('[data-testid="stPlotlyChart"]').first.text_content()
                assert ZH["dg.tok_embed"] in drawn and ZH["dg.softmax"] in drawn
            pg.screenshot(path=str(out / f"{n:02d}-{path}.png"), full_page=True)
        # from the Overview, the diagram's link opens the positional-encoding page, still in Chinese
        pg.locator('[data-testid="stSidebarNav"]').get_by_text(ZH["nav.overview"], exact=True).click()
        settle(pg, WAIT_MS)
        pg.get_by_text(ZH["ov.link"].format(block=ZH["dg.short.pos"], page=ZH["nav.positional"])).click()
        pg.get_by_role("heading", name=ZH["pe.title"]).first.wait_for()
        settle(pg, WAIT_MS)
        assert pg.locator('[data-testid="stException"]').count() == 0
        browser.close()
