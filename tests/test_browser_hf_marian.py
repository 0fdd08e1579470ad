"""In Chromium against the real server: an imported Marian translator with separate source and target
vocabularies, loaded in bfloat16 (VIZ_DTYPE): the decoding page's beam search starts at the folder's
num_beams, its cross-attention shows the source's pieces and the sequence the target's, and the attention
page draws; no exception anywhere. Screenshots go to test-artifacts/."""
from __future__ import annotations

import os

import pytest

import hf_util as H
from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, app_server, no_exception, settle
from viz_transformer import decode, DecodeSettings, load_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
NAME = "marian-separate-vocabs"


@pytest.fixture(scope="module")
def hf_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-browser")
    H.build_marian(H.MARIAN_BY_ID[NAME], root / NAME)
    with app_server(root, "server-hf-marian.log", VIZ_DTYPE="bfloat16") as url:
        yield url, root


def _ready(pg, charts: bool = True) -> None:
    settle(pg)
    if charts:
        pg.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()


def test_separate_vocabularies_in_the_browser(hf_server):
    from playwright.sync_api import sync_playwright
    url, root = hf_server
    hm = load_checkpoint(root / NAME, dtype="bfloat16")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1440, "height": 2000})
        pg.set_default_timeout(TIMEOUT_MS)
        pg.goto(url)
        _ready(pg, charts=False)
        text = pg.locator("textarea").first.input_value()
        pg.locator('[data-testid="stSidebarNav"]').get_by_text("Step-through decoding", exact=True).click()
        _ready(pg, charts=False)                           # step 0: nothing drawn yet
        pg.get_by_text("beam search", exact=True).first.click()
        _ready(pg, charts=False)
        assert pg.locator('[data-testid="stSlider"]').filter(has_text="Beam width").inner_text().count(
            str(hm.cfg.num_beams)) >= 1
        for _ in range(2):
            pg.get_by_role("button", name="Next").first.click()
            _ready(pg)
        no_exception(pg)
        ref = decode(hm, text, DecodeSettings("beam", beam_width=hm.cfg.num_beams, max_new_tokens=20))
        sequence = pg.locator('.st-key-output_sequence').inner_text()
        assert " ".join(s.piece for s in ref.steps[:2]) in sequence                 # the target's pieces
        cross = pg.locator('[data-testid="stPlotlyChart"]').filter(has_text="Cross-attention").first
        assert hm.tokenizer.src_pieces(hm.tokenizer.encode(text))[1] in cross.inner_text()   # the source's pieces
        pg.screenshot(path=str(ARTIFACTS / "hf-marian-decoding.png"))
        pg.locator('[data-testid="stSidebarNav"]').get_by_text("Attention: heads and layers", exact=True).click()
        _ready(pg)
        no_exception(pg)
        pg.screenshot(path=str(ARTIFACTS / "hf-marian-attention.png"))
        browser.close()
