"""In Chromium against the real server: a tiny random T5 v1.0 (tests/hf_t5_util.py), in English and in Chinese, on
a laptop screen (1366 x 768) and a phone (390 x 844). The positional page draws each head's bias by offset, the
buckets and the bias matrix for the text; the attention and decoding pages draw. Each view waits for the app's own
signals and is saved under /work/notes/shots/t5/ when that folder's parent exists, else test-artifacts/t5/."""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlencode

import pytest

import hf_t5_util as U
from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, app_server, charts, no_exception, settle
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
NAME = "t5-v1.0-relu-tied"
TEXT = U.TEXTS[3]
NOTES = Path("/work/notes/shots")
SHOTS = NOTES / "t5" if NOTES.is_dir() else ARTIFACTS / "t5"


@pytest.fixture(scope="module")
def t5_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("t5-browser")
    U.build_t5(U.T5_BY_ID[NAME], root / NAME)
    with app_server(root, "server-t5.log") as url:
        yield url


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_t5_pages_in_the_browser(t5_server, lang):
    from playwright.sync_api import sync_playwright
    table = ZH if lang == "zh" else EN
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for w, h in ((1366, 768), (390, 844)):
            pg = browser.new_page(viewport={"width": w, "height": h})
            pg.set_default_timeout(TIMEOUT_MS)
            for page in ("positional", "attention", "decoding"):
                pg.goto(f"{t5_server}/{page}?" + urlencode({"checkpoint": NAME, "text": TEXT, "lang": lang}))
                settle(pg)
                no_exception(pg)
                main = pg.locator('[data-testid="stMain"]').inner_text()
                if page != "decoding":                   # decoding draws once a step is taken
                    assert charts(pg) >= 1, page
                pg.screenshot(path=str(SHOTS / f"{page}-{lang}-{w}x{h}.png"), full_page=True)
                if page == "positional":
                    assert charts(pg) >= 3 and table["pe.rel.rope"][:10] in main
                    for i, name in ((0, "by-offset"), (2, "matrix")):
                        pg.locator('[data-testid="stPlotlyChart"]').nth(i).scroll_into_view_if_needed()
                        pg.screenshot(path=str(SHOTS / f"{page}-{name}-{lang}-{w}x{h}.png"))
            pg.close()
        browser.close()
