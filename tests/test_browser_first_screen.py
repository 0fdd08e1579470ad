"""A newcomer's first screen, in Chromium, in English and in Chinese: on a 1366 × 768 laptop the sidebar's checkpoint
picker and text box lie inside the window as the page opens, above the page list; on a 390 × 844 phone they lie
inside the screen once the sidebar's drawer is opened. On the phone the Overview's architecture diagram (the
translator's: an encoder and a decoder) is no wider than the screen and its title is whole on it, inside its
figure and clear of the page's header.
Screenshots under test-artifacts/first-screen/ (look at them)."""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_util import ARTIFACTS, CHROMIUM, settle, still
from test_browser_phone import PHONE_UA
from viz_explorer.kit.strings import EN, fill
from viz_explorer.kit.strings_zh import ZH

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
SHOTS = ARTIFACTS / "first-screen"
SCREENS = {"laptop": (1366, 768), "phone": (390, 844)}
BOX = "e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }"


def _open(browser, url: str, screen: str, lang: str):
    w, h = SCREENS[screen]
    phone = dict(user_agent=PHONE_UA, is_mobile=True, has_touch=True) if screen == "phone" else {}
    pg = browser.new_context(viewport={"width": w, "height": h}, **phone).new_page()
    pg.set_default_timeout(120_000)
    pg.goto(f"{url}/?checkpoint=zh-en&lang={lang}")
    settle(pg)
    return pg


def _within(box, w: int, h: int) -> bool:
    return box[0] >= 0 and box[1] >= 0 and box[2] <= w and box[3] <= h and box[2] > box[0] and box[3] > box[1]


@pytest.mark.parametrize("screen", list(SCREENS))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_text_box_and_the_checkpoint_are_in_the_first_screen(server, page, screen, lang):   # noqa: F811
    url, root = server
    table = EN if lang == "en" else ZH
    pg = _open(page.context.browser, url, screen, lang)
    w, h = SCREENS[screen]
    sidebar = pg.locator('[data-testid="stSidebar"]')
    if screen == "phone":                                   # a phone's sidebar is a drawer, closed at first
        assert sidebar.locator("textarea").evaluate(BOX)[2] <= 0             # off the screen
        pg.locator('[data-testid="stExpandSidebarButton"]').click()
        pg.wait_for_function("() => document.querySelector('[data-testid=\"stSidebar\"] textarea')"
                             ".getBoundingClientRect().left >= 0")
        still(pg)
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{screen}-{lang}.png"))
    text = sidebar.get_by_label(table["sidebar.text"], exact=True)
    picker = sidebar.locator('[data-testid="stSelectbox"]').filter(has_text=table["sidebar.checkpoint"])
    assert picker.count() == 1 and text.count() == 1
    for name, box in (("the text box", text.evaluate(BOX)), ("the checkpoint picker", picker.evaluate(BOX))):
        assert _within(box, w, h), f"{name} at {box}, outside the first {w} × {h} px"
    nav = sidebar.locator('[data-testid="stSidebarNav"]').evaluate(BOX)
    assert nav[1] >= text.evaluate(BOX)[3], "the page list is not under the text box"
    pg.context.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_overview_diagram_fits_a_phone(server, page, lang):     # noqa: F811
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the shipped zh-en's config")
    from viz_transformer import load_checkpoint
    cfg = load_checkpoint(root / "zh-en").cfg
    table = EN if lang == "en" else ZH
    layers = fill(table["sidebar.layers_ed"], enc=cfg.n_encoder_layers, dec=cfg.n_decoder_layers)
    title = fill(table["ov.diagram_title"], arch=table["ov.arch." + cfg.architecture], layers=layers,
                 heads=cfg.n_heads, d_model=cfg.d_model, norm=table["ov.norm_short." + cfg.norm])
    pg = _open(page.context.browser, url, "phone", lang)
    w, h = SCREENS["phone"]
    charts = pg.locator('.st-key-ov_diagram_box [data-testid="stPlotlyChart"]')
    assert charts.count() >= 1
    for i in range(charts.count()):
        svg = charts.nth(i).locator(".main-svg").first.evaluate(BOX)
        assert svg[0] >= 0 and svg[2] <= w, f"figure {i} spans {svg[0]}..{svg[2]} px of a {w} px screen"
    drawn = charts.first.locator(".g-gtitle text")
    drawn.evaluate("e => e.scrollIntoView({block: 'center'})")
    still(pg)
    pg.screenshot(path=str(SHOTS / f"phone-diagram-{lang}.png"))
    assert "".join(drawn.text_content().split()) == "".join(title.split())      # all of it, its lines joined
    box = drawn.evaluate(BOX)
    assert _within(box, w, h), f"the title at {box}, outside the {w} × {h} px screen"
    svg = charts.first.locator(".main-svg").first.evaluate(BOX)
    assert svg[0] <= box[0] and box[2] <= svg[2] and svg[1] <= box[1], f"the title {box} cut by its figure {svg}"
    header = pg.locator('[data-testid="stHeader"]').evaluate(BOX)
    assert box[1] >= header[3], f"the title {box} under the page's header {header}"
    pg.context.close()
