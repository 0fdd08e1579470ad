"""Every lesson in both languages on a 1366×768 laptop and a 390×844 phone (a walk: `python -m pytest -m walk`):
each step as test_browser_lessons checks it, the lesson panel in the first screen, and screenshots of each lesson's
first step and its question steps under test-artifacts/lesson-screens/ (look at them)."""
from __future__ import annotations

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS
from test_browser_lessons import walk
from viz_explorer.lessons import lesson_file

SCREENS = {"laptop": (1366, 768), "phone": (390, 844)}
pytestmark = [pytest.mark.browser, pytest.mark.walk,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


def shown_steps(lesson) -> set[int]:
    """The steps worth a screenshot: the first, and every one that asks a question."""
    return {1} | {i for i, s in enumerate(lesson.steps, start=1) if s.question}


@pytest.mark.parametrize("screen", list(SCREENS))
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", lesson_file.list_lessons())
def test_every_lesson_on_a_laptop_and_a_phone(server, name, lang, screen):
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the lessons use the shipped checkpoints")
    from playwright.sync_api import sync_playwright
    folder = ARTIFACTS / "lesson-screens"
    folder.mkdir(parents=True, exist_ok=True)
    w, h = SCREENS[screen]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": w, "height": h}, is_mobile=screen == "phone",
                              has_touch=screen == "phone")
        pg.set_default_timeout(TIMEOUT_MS)
        pg.goto(f"{url}/?lesson={name}&lang={lang}")
        panel = pg.locator('[data-testid="stMain"] .st-key-lesson_panel')
        panel.wait_for()
        top = panel.bounding_box()
        assert top is not None and top["y"] < h / 2, top           # the lesson opens in the first screen
        walk(pg, url, name, lang, str(folder / f"{name}-{lang}-{screen}"), only=shown_steps)
        browser.close()
