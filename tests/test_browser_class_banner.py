"""The class banner in Chromium at 1366 × 768, as the teacher sees it and as "Present this class" projects it
(`?present=1`, large type, the banner in a side column), in English and in Chinese: the copy button Streamlit lays
over the join address's box covers none of the address's lines, the address is the whole join link, and the class
code in large type stays inside its column (not cut at its edge), under its visible label. Screenshots under
test-artifacts/class-banner/ (look at them)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, settle, still
from stclient import Server
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
SHOTS = ARTIFACTS / "class-banner"
PUBLIC = "http://192.0.2.10:8765"         # TEST-NET-1: the address the banner shows
BOX = "e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }"
# The boxes of the address's lines as drawn (one per wrapped line): a Range over the code element's text.
LINES = ("e => { const r = document.createRange(); r.selectNodeContents(e);"
         " return [...r.getClientRects()].map(q => [q.left, q.top, q.right, q.bottom]); }")


def _overlap(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


@pytest.fixture(scope="module")
def class_server(ckpt_root, tmp_path_factory):
    db = tmp_path_factory.mktemp("class-banner") / "viz.sqlite3"
    with Server(ROOT, ckpt_root, log=ARTIFACTS / "class-banner-server.log",
                env={"VIZ_DATABASE_URL": f"sqlite:///{db}", "VIZ_PUBLIC_URL": PUBLIC}) as server:
        yield server


def _check(pg, lang: str, code: str, where: str) -> None:
    table = EN if lang == "en" else ZH
    main = pg.locator('[data-testid="stMain"]')
    join = main.locator('.st-key-class_join [data-testid="stCode"]')
    join.first.wait_for()                             # the address changes before the rerun that draws the banner ends
    settle(pg)
    assert join.count() == 1, where
    join.evaluate("e => e.scrollIntoView({block: 'center'})")
    still(pg)
    join.hover()                                      # the copy button shows while the pointer is over the box
    button = join.locator("button")
    button.wait_for(state="visible")
    pg.wait_for_timeout(300)                          # its fade-in
    pg.screenshot(path=str(SHOTS / f"{where}-{lang}-address.png"))
    text = join.locator("code")
    assert "".join(text.inner_text().split()) == f"{PUBLIC}/live_class?class={code}&lang={lang}", where
    lines, btn = text.evaluate(LINES), button.evaluate(BOX)
    assert lines and btn[2] > btn[0], where
    hit = [line for line in lines if _overlap(line, btn)]
    assert not hit, f"{where}: the copy button {btn} covers the address's lines {hit}"
    big = main.locator(".st-key-class_card_code, .st-key-class_code").first
    main.evaluate("m => m.scrollTo({top: 0, behavior: 'instant'})")
    still(pg)
    pg.screenshot(path=str(SHOTS / f"{where}-{lang}-top.png"))
    assert big.inner_text().strip() == code, where
    fits = big.locator("p").evaluate("p => p.scrollWidth <= p.clientWidth + 1 && p.getBoundingClientRect().right"
                                     " <= p.parentElement.closest('[data-testid=\"stColumn\"]').getBoundingClientRect().right + 1")
    assert fits, f"{where}: the class code runs past its column"
    label = main.get_by_text(table["qr.code"], exact=True).first.evaluate(BOX)
    header = pg.locator('[data-testid="stHeader"]').evaluate(BOX)
    assert label[1] >= header[3] and label[3] <= big.evaluate(BOX)[1] + 1, f"{where}: the label {label} is cut"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_copy_button_leaves_the_join_address_readable(class_server, lang):
    from playwright.sync_api import sync_playwright
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1366, "height": 768})
        pg.set_default_timeout(TIMEOUT_MS)
        pg.goto(f"{class_server.url}/live_class?lang={lang}")
        settle(pg)
        pg.locator(".st-key-lc_start button").click()
        pg.wait_for_url(re.compile(r"teach="))
        settle(pg)
        code = re.search(r"teach=([A-Z0-9]{8})", pg.url).group(1)
        _check(pg, lang, code, "teacher")
        pg.locator(".st-key-lc_present button").click()
        pg.wait_for_url(re.compile(r"present=1"))
        settle(pg)
        _check(pg, lang, code, "presented")
        browser.close()
