"""Presenter mode in the real server and Chromium, at projector sizes: ?present=1 gives large type, the
sidebar collapsed, the page scrolling element by element (a figure at a time), and the arrow keys step through the pages and a lesson's steps.
Screenshots under test-artifacts/presenter-*.png (look at them)."""
from __future__ import annotations

import pytest

from browser_util import ARTIFACTS, CHROMIUM, settle, still
from viz_explorer.kit import presenter
from viz_explorer.lessons.lesson_file import load_lesson

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
SIZES = {"en": (1280, 720), "zh": (1920, 1080)}
TITLES = {"en": ("Overview", "Attention: heads and layers"), "zh": ("概览", "注意力：头与层")}
ROOT_PX = "() => parseFloat(getComputedStyle(document.documentElement).fontSize)"
CAPTION_PX = "() => parseFloat(getComputedStyle(document.querySelector('[data-testid=\"stCaptionContainer\"]')).fontSize)"


@pytest.fixture()
def tab(page):       # noqa: F811
    """A fresh tab per test, sized by the test."""
    context = page.context.browser.new_context()
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_presenter_mode_large_type_no_sidebar_and_the_arrow_keys(server, tab, lang):     # noqa: F811
    url, _ = server
    w, h = SIZES[lang]
    tab.set_viewport_size({"width": w, "height": h})
    tab.goto(f"{url}/?lang={lang}")
    settle(tab)
    normal = tab.evaluate(CAPTION_PX)
    assert tab.locator('[data-testid="stSidebar"]').get_attribute("data-collapsed") == "false"   # as before
    tab.goto(f"{url}/?present=1&lang={lang}")
    tab.get_by_role("heading", name=TITLES[lang][0]).first.wait_for()
    settle(tab)
    assert tab.evaluate(ROOT_PX) == presenter.FONT_PX
    assert tab.evaluate(CAPTION_PX) == pytest.approx(normal * presenter.FONT_PX / 16, rel=0.02)   # all type grows
    side = tab.locator('[data-testid="stSidebar"]')
    assert side.get_attribute("data-collapsed") == "true" and not side.is_visible()
    tab.screenshot(path=str(ARTIFACTS / f"presenter-overview-{lang}-{w}x{h}.png"))
    main = tab.locator('[data-testid="stMain"]')
    assert main.evaluate("m => getComputedStyle(m).scrollSnapType") == "y mandatory"
    chart = tab.locator('[data-testid="stPlotlyChart"]').first
    header = 3.75 * presenter.FONT_PX
    # scroll to 12 px short of the figure's top under the header: the page comes to rest on the figure
    main.evaluate("(m, d) => m.scrollBy({top: d, behavior: 'instant'})", chart.bounding_box()["y"] - header - 12)
    still(tab)
    top = chart.bounding_box()["y"]
    assert abs(top - header) <= 2, (top, header)                      # the figure starts under the header
    tab.screenshot(path=str(ARTIFACTS / f"presenter-overview-figure-{lang}-{w}x{h}.png"))
    tab.mouse.click(w - 5, h // 2)                                  # focus on the page, not on a widget
    tab.keyboard.press("ArrowRight")
    tab.get_by_role("heading", name=TITLES[lang][1]).first.wait_for()
    settle(tab)
    assert "/attention" in tab.url and "present=1" in tab.url and f"lang={lang}" in tab.url
    tab.screenshot(path=str(ARTIFACTS / f"presenter-attention-{lang}-{w}x{h}.png"))
    assert tab.locator('[data-testid="stException"]').count() == 0
    tab.mouse.click(w - 5, h // 2)
    tab.keyboard.press("ArrowLeft")
    tab.get_by_role("heading", name=TITLES[lang][0]).first.wait_for()
    assert "/attention" not in tab.url and "present=1" in tab.url


def test_presenting_a_lesson_the_arrow_key_moves_its_step(server, tab):     # noqa: F811
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the lesson uses the shipped checkpoints")
    tab.set_viewport_size({"width": 1280, "height": 720})
    n = len(load_lesson("attention-step-by-step").steps)
    tab.goto(f"{url}/?present=1&lesson=attention-step-by-step")
    main = tab.locator('[data-testid="stMain"]')
    main.get_by_text(f"Step 1 of {n}", exact=True).wait_for()
    settle(tab)
    tab.screenshot(path=str(ARTIFACTS / "presenter-lesson-1.png"))
    tab.mouse.click(1275, 360)
    tab.keyboard.press("ArrowRight")
    main.get_by_text(f"Step 2 of {n}", exact=True).wait_for()
    settle(tab)
    assert "step=2" in tab.url and "present=1" in tab.url
    tab.get_by_role("heading", name="Attention step by step").first.wait_for()           # the step's page
    tab.screenshot(path=str(ARTIFACTS / "presenter-lesson-2.png"))
    assert tab.locator('[data-testid="stException"]').count() == 0
