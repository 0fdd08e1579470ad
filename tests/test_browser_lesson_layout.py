"""A lesson link on a laptop (1366x768) and a phone (390x844), in English and Chinese: the step's note, its
step counter and "Next lesson step" stand at the top of the main column, inside the first screen without
scrolling (the sidebar keeps the navigation). Screenshots under test-artifacts/lesson-layout/ (look at them)."""
from __future__ import annotations

import pytest

from browser_util import ARTIFACTS, CHROMIUM, settle, still
from test_browser_lessons import STEP, _shown
from viz_explorer.lessons import lesson_file

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
SHOTS = ARTIFACTS / "lesson-layout"
LESSON, STEP_NO = "attention-step-by-step", 2


@pytest.fixture()
def tab(page):       # noqa: F811
    """A fresh browser context per case, so no session state carries over."""
    context = page.context.browser.new_context()
    yield context.new_page()
    context.close()


def _inside(box: dict | None, height: int, what: str) -> None:
    assert box is not None, f"{what} is not drawn"
    assert box["y"] >= 0 and box["y"] + box["height"] <= height, f"{what} is at {box}, the screen is {height} high"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(1366, 768), (390, 844)], ids=["laptop", "phone"])
def test_the_lesson_step_is_in_the_first_screen(server, tab, size, lang):     # noqa: F811
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the lesson uses the shipped checkpoint zh-en")
    w, h = size
    tab.set_viewport_size({"width": w, "height": h})
    tab.goto(f"{url}/?lesson={LESSON}&step={STEP_NO}" + ("&lang=zh" if lang == "zh" else ""))
    lesson = lesson_file.load_lesson(LESSON)
    counter = STEP[lang].format(i=STEP_NO, n=len(lesson.steps))
    main = tab.locator('[data-testid="stMain"]')
    tab.get_by_text(counter, exact=True).first.wait_for(state="attached")      # wherever the lesson stands
    settle(tab)
    tab.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stPlotlyChart\"]')]"
                          ".every(c => c.querySelector('.main-svg'))")
    still(tab)                                                  # the charts' own layout settles
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{lang}-{w}x{h}.png"), full_page=False)
    assert tab.locator('[data-testid="stException"]').count() == 0
    assert tab.evaluate("() => window.scrollY") == 0 and main.evaluate("m => m.scrollTop") == 0   # not scrolled
    panel = main.locator(".st-key-lesson_panel")
    assert panel.count() == 1, "the lesson is not in the main column"
    note = panel.locator('[data-testid="stMarkdownContainer"]').filter(has_text=_shown(lesson.steps[STEP_NO - 1].note[lang]))
    assert note.count() >= 1, panel.inner_text()
    _inside(note.first.bounding_box(), h, "the note")
    _inside(panel.get_by_text(counter, exact=True).bounding_box(), h, "the step counter")
    nxt = main.locator(".st-key-ls_next button")
    _inside(nxt.bounding_box(), h, "the next button")
    assert nxt.is_enabled() and nxt.is_visible()
    if w < 500:                                                 # a phone: the sidebar is closed, the lesson is not
        assert not tab.locator('[data-testid="stSidebarNav"]').is_visible()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_pages_formulas_fit_a_phone(server, tab, lang):     # noqa: F811
    """At 390 px the attention formula (the widest the pages show) and the decoding page's are whole on the
    screen: each display formula's box holds all of it, nothing cut off at the edge."""
    url, root = server
    tab.set_viewport_size({"width": 390, "height": 844})
    for name in ("attention", "decoding"):
        tab.goto(f"{url}/{name}" + ("?lang=zh" if lang == "zh" else ""))
        tab.locator(".katex-display").first.wait_for()
        settle(tab)
        widths = tab.eval_on_selector_all(".katex-display", "els => els.map(e => [e.scrollWidth, e.clientWidth, "
                                          "e.getBoundingClientRect().right])")
        assert widths, name
        for scroll, client, right in widths:
            assert scroll <= client + 1 and right <= 390, (name, lang, widths)
        tab.screenshot(path=str(SHOTS / f"formula-{name}-{lang}-390.png"), full_page=False)
