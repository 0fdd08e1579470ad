"""End-to-end: both shipped lessons from the first step to the last in the real server and Chromium,
plus the logit lens and patching pages; a screenshot per step under test-artifacts/ (look at them)."""
from __future__ import annotations

import re

import pytest

from test_browser import ARTIFACTS, CHROMIUM, _no_exception, _settle, page, server  # noqa: F401  (fixtures)
from viz_transformer import lessons

ARCH = {"zh-en": "enc-dec · 3+3 layers", "en-stories": "decoder-only · 4 layers"}
pytestmark = pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")


def _ready(pg) -> None:
    """The script has finished (app root not running) and no skeleton placeholder is left."""
    _settle(pg)
    pg.wait_for_function("() => { const r = document.querySelector('[data-test-script-state]');"
                         " return (!r || r.getAttribute('data-test-script-state') === 'notRunning')"
                         " && !document.querySelector('[data-testid=\"stSkeleton\"]'); }")


@pytest.mark.parametrize("name", ["attention-step-by-step", "positions-and-masks"])
def test_a_lesson_from_start_to_end(server, page, name):      # noqa: F811
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the lessons use the shipped checkpoints (zh-en, en-stories)")
    pg = page
    lesson = lessons.load_lesson(name)
    n = len(lesson.steps)
    pg.goto(f"{url}/?lesson={name}")
    side = pg.locator('[data-testid="stSidebar"]')
    for i, step in enumerate(lesson.steps, start=1):
        side.get_by_text(f"Step {i} of {n}", exact=True).wait_for()
        _ready(pg)
        assert lessons.note(step.note)[:20].replace("*", "").replace("`", "")[:12] in side.inner_text()
        assert step.note["zh"][:6].replace("*", "") in side.inner_text()
        assert f"step={i}" in pg.url and f"lesson={name}" in pg.url
        pg.screenshot(path=str(ARTIFACTS / f"lesson-{name}-{i}-{step.page}.png"), full_page=False)
        if "checkpoint" in step.settings:           # the sidebar's model caption names the architecture
            assert ARCH[step.settings["checkpoint"]] in side.inner_text()
        _no_exception(pg)
        nxt = side.get_by_role("button", name=re.compile("Next"))
        if i == n:
            assert nxt.is_disabled()
        else:
            pg.mouse.move(5, 5)                         # no tooltip left over the button
            nxt.click()


def test_lens_and_patching_pages(server, page):    # noqa: F811
    url, root = server
    pg = page
    pg.goto(f"{url}/lens")
    _ready(pg)
    pg.get_by_role("heading", name=re.compile("Logit lens")).first.wait_for()
    pg.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    _no_exception(pg)
    pg.screenshot(path=str(ARTIFACTS / "lens.png"))
    pg.goto(f"{url}/patching")
    _ready(pg)
    pg.get_by_role("heading", name=re.compile("Activation patching")).first.wait_for()
    _no_exception(pg)
    pg.screenshot(path=str(ARTIFACTS / "patching.png"))
