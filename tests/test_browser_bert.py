"""In Chromium against the real server: a tiny random BERT with a masked-LM head (tests/hf_bert_util.py) on a
sentence pair, in English and in Chinese. The attention page draws the pair, then again with [CLS] and [SEP]
hidden (the title says the rows are renormalised); fill in the blank draws its best pieces and the lens layer by
layer. Each view waits for the app's own signals (script notRunning, no skeleton, every chart drawn) and is saved
under test-artifacts/bert/ (look at them)."""
from __future__ import annotations

import os
from urllib.parse import urlencode

import pytest

import hf_bert_util as B
from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, app_server, charts, no_exception, settle
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
NAME = "tiny-bert"
PAIR = f"{B.PAIR[0]} [SEP] {B.PAIR[1]}"
BLANK = f"The cat sat on the [MASK]. [SEP] {B.PAIR[1]}"
SHOTS = ARTIFACTS / "bert"


@pytest.fixture(scope="module")
def bert_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert-browser")
    B.build(B.SHAPE_BY_ID["bert-mlm"], root / NAME)
    with app_server(root, "server-bert.log") as url:
        yield url


@pytest.fixture(scope="module")
def bert_page(bert_server):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1440, "height": 1800})
        pg.set_default_timeout(TIMEOUT_MS)
        yield pg
        browser.close()


def _open(pg, url: str, page: str, text: str, lang: str) -> str:
    pg.goto(f"{url}/{page}?" + urlencode({"checkpoint": NAME, "text": text, "lang": lang}))
    settle(pg)
    no_exception(pg)
    return pg.locator('[data-testid="stMain"]').inner_text()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_bert_pair_without_its_special_tokens(bert_server, bert_page, lang):
    table, pg = (ZH if lang == "zh" else EN), bert_page
    SHOTS.mkdir(parents=True, exist_ok=True)
    main = _open(pg, bert_server, "attention", PAIR, lang)
    assert charts(pg) >= 2 and "[CLS]" in main
    pg.screenshot(path=str(SHOTS / f"attention-{lang}.png"), full_page=True)

    pg.get_by_text(table["at.no_special"], exact=True).click()
    settle(pg)
    no_exception(pg)
    assert charts(pg) >= 2
    head = pg.locator('[data-testid="stPlotlyChart"]').filter(
        has_text=table["at.no_special_title"].split("{title}")[-1][:12]).first
    assert "[CLS]" not in head.inner_text() and "[SEP]" not in head.inner_text()
    pg.screenshot(path=str(SHOTS / f"attention-no-special-{lang}.png"), full_page=True)

    main = _open(pg, bert_server, "lens", BLANK, lang)
    assert table["fb.title"] in main and pg.locator('[data-testid="stDataFrame"]').count() >= 2
    pg.screenshot(path=str(SHOTS / f"fill-in-the-blank-{lang}.png"), full_page=True)

    main = _open(pg, bert_server, "knockout", BLANK, lang)
    assert table["ko.blank_what"].split("{")[0] in main
    pg.screenshot(path=str(SHOTS / f"knockout-{lang}.png"), full_page=True)
    main = _open(pg, bert_server, "patching", BLANK, lang)
    assert table["pt.blank_what"] in main
    box = pg.get_by_label(table["pt.other"])
    box.fill(BLANK.replace("cat", "mat"))
    box.press("Enter")
    settle(pg)
    no_exception(pg)
    assert charts(pg) >= 1
    pg.screenshot(path=str(SHOTS / f"patching-{lang}.png"), full_page=True)
