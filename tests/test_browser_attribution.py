"""In Chromium against the real server (the shipped checkpoints when zh-en loads, else the tiny ones): the Attention vs
attribution page at 我是一名工程师。 (7 characters) and at a 120-piece text, in English and in Chinese, at a desktop
(1366 × 768) and a phone (390 × 844) width. Each view waits for the app's own signals, has its methods figure drawn
(legible by tests/legibility.js, as every chart: no plot side under 110 px, no overlapping labels, nothing past the
edge), the τ table and the sentence naming the best method; at 120 pieces the window slider, and the comparison
after its button (past 64 pieces it waits for one). Screenshots go to
test-artifacts/attribution/ (look at them)."""
from __future__ import annotations

import os
from urllib.parse import urlencode

import pytest

from benchmarks.legibility import MEASURER
from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, charts, no_exception, settle
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
SHOTS = ARTIFACTS / "attribution"
SHORT = "我是一名工程师。"
LONG = ("这是我第一次看牙医。这孩子哭了一整夜。你要什么样的三明治？小偷跑了。蛋是按打卖的。我们明天去北京看朋友，然后一起去公园散步，"
        "晚上在饭店吃饭。她在学校工作，每天早上七点起床，喝一杯茶，然后坐公共汽车去学校。他是我的朋友，我们一起学习中文和英文。")
SIZES = {"desktop": (1366, 768), "phone": (390, 844)}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _pieces(root, text: str) -> int:
    from viz_transformer import load_checkpoint
    name = "zh-en" if root.name == "checkpoints" else "tiny-zh-en"
    return len(load_checkpoint(root / name).run(text).src_ids)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("text", [SHORT, LONG], ids=["short", "long"])
def test_the_page_at_7_and_120_pieces(server, browser, lang, text):
    url, root = server
    table = ZH if lang == "zh" else EN
    name = "zh-en" if root.name == "checkpoints" else "tiny-zh-en"
    SHOTS.mkdir(parents=True, exist_ok=True)
    for size, (w, h) in SIZES.items():
        pg = browser.new_page(viewport={"width": w, "height": h})
        pg.set_default_timeout(TIMEOUT_MS)
        pg.goto(f"{url}/attribution?" + urlencode({"checkpoint": name, "text": text, "lang": lang}))
        settle(pg)
        no_exception(pg)
        assert charts(pg) >= 1
        main = pg.locator('[data-testid="stMain"]').inner_text()
        if text == LONG and root.name == "checkpoints":           # past 64 pieces the comparison waits for a click
            assert table["ab.long"].split("{n}")[0].strip() in main
            pg.get_by_role("button", name=table["ab.run_gradients"]).click()
            settle(pg)
            no_exception(pg)
            main = pg.locator('[data-testid="stMain"]').inner_text()
        assert table["ab.title"] in main
        best = table["ab.best"].split("{method}")[0].replace("*", "").strip()
        assert best in main, main[:2000]
        assert pg.locator('[data-testid="stDataFrame"]').count() >= 1
        if text == LONG:
            assert _pieces(root, text) >= 100 or root.name != "checkpoints"
            assert table["fig.window"].split("(")[0].split("{")[0].strip() in main     # the window slider
        drawn = pg.evaluate("() => { const p = document.querySelector('.js-plotly-plot'); "
                            "return [p.data[0].x.length, p.data[0].y.length, p._fullLayout.xaxis.range, "
                            "p._fullLayout.yaxis.range]; }")
        n, m, (x0, x1), (y0, y1) = drawn        # the axes on the cells (or their first window): no blank band beside
        assert x0 == pytest.approx(-0.5) and float(x1 + 0.5).is_integer() and x1 <= n - 0.5, drawn
        assert (y0, y1) == pytest.approx((m - 0.5, -0.5)), drawn
        if size == "desktop":                       # every chart legible, measured as the legibility walk does
            bad = [c for c in pg.evaluate(MEASURER, {}) if c["problems"]]
            assert not bad, bad
        pg.screenshot(path=str(SHOTS / f"{'short' if text == SHORT else 'long'}-{lang}-{size}.png"))
        pg.close()
