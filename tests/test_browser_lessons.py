"""End-to-end: every shipped lesson from the first step to the last in the real server and Chromium,
plus the logit lens and patching pages; a screenshot per step under test-artifacts/ (look at them)."""
from __future__ import annotations

import re

import pytest

from browser_util import ARTIFACTS, CHROMIUM, hover, no_exception, settle
from viz_explorer.lessons import lesson_file

ARCH = {"zh-en": "enc-dec · 3+3 layers", "en-stories": "decoder-only · 4 layers"}
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


STEP = {"en": "Step {i} of {n}", "zh": "第 {i} 步，共 {n} 步"}
NEXT = {"en": "Next lesson step", "zh": "课程下一步"}


def _shown(note: str) -> str:
    """The note's opening words as the page shows them: before its first number from the model, no markup."""
    return re.sub(r"[*`]", "", lesson_file.PLACEHOLDER.split(note)[0])[:20]


# each lesson once in the default run, the languages taking turns; every lesson in both languages on a laptop and
# a phone is the walk's (test_browser_lesson_screens.py)
ONCE = [(name, ("en", "zh")[i % 2]) for i, name in enumerate(lesson_file.list_lessons())]


@pytest.mark.parametrize("name, lang", ONCE)
def test_a_lesson_from_start_to_end(server, page, name, lang):      # noqa: F811
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the lessons use the shipped checkpoints")
    walk(page, url, name, lang, f"lesson-{name}-{lang}")


def walk(pg, url: str, name: str, lang: str, shots: str, only=None) -> None:
    """Open ?lesson=NAME in `lang` and click "Next lesson step" to the end, checking every step: its number, one
    note filled in and rendered in the interface's language, no claim broken, the address, the sidebar's text, no
    exception; a screenshot of every step (of the steps `only` names, when given) under ARTIFACTS as SHOTS-i-page."""
    lesson = lesson_file.load_lesson(name)
    n = len(lesson.steps)
    pg.goto(f"{url}/?lesson={name}&lang={lang}")
    side = pg.locator('[data-testid="stSidebar"]')
    box = pg.locator('[data-testid="stMain"] .st-key-lesson_panel')     # the lesson stands on top of the page
    for i, step in enumerate(lesson.steps, start=1):
        box.get_by_text(STEP[lang].format(i=i, n=n), exact=True).wait_for()
        settle(pg)
        shown = box.locator('[data-testid="stMarkdownContainer"]').all_inner_texts()
        notes = [x for x in shown if _shown(step.note["en"]) in x or _shown(step.note["zh"]) in x]
        assert len(notes) == 1, shown                            # one note, filled in and rendered:
        assert all("**" not in x and "{" not in x for x in notes), notes    # no markup or placeholder left
        assert _shown(step.note[lang]) in notes[0]               # in the interface's language
        if "**" in step.note[lang]:                              # emphasis became bold text
            assert box.locator('[data-testid="stMarkdownContainer"] strong').count() > 0
        assert "does not hold" not in box.inner_text() and "不成立" not in box.inner_text()
        assert f"step={i}" in pg.url and f"lesson={name}" in pg.url
        assert side.locator("textarea").first.input_value() == lesson_file.model_and_text(lesson, i - 1)[1]
        if step.question:                                        # the question box stands on the step's page
            pg.locator(".st-key-lesson_question").wait_for()
        if only is None or i in only(lesson):
            pg.screenshot(path=str(ARTIFACTS / f"{shots}-{i}-{step.page}.png"), full_page=False)
        ckpt = step.settings.get("checkpoint")
        if ckpt in ARCH and lang == "en":                        # the sidebar's model caption names the architecture
            assert ARCH[ckpt] in side.inner_text()
        no_exception(pg)
        nxt = box.get_by_role("button", name=NEXT[lang])
        if i == n:
            assert nxt.is_disabled()
        else:
            pg.mouse.move(5, 5)                         # no tooltip left over the button
            nxt.click()


def test_lens_and_patching_pages(server, page):    # noqa: F811
    url, root = server
    pg = page
    pg.goto(f"{url}/lens")
    settle(pg)
    pg.get_by_role("heading", name=re.compile("Logit lens")).first.wait_for()
    pg.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    no_exception(pg)
    pg.screenshot(path=str(ARTIFACTS / "lens.png"))
    pg.goto(f"{url}/patching")
    settle(pg)
    pg.get_by_role("heading", name=re.compile("Activation patching")).first.wait_for()
    no_exception(pg)
    pg.screenshot(path=str(ARTIFACTS / "patching.png"))


def test_a_question_is_answered_by_a_click_on_a_key_cell_and_revealed(server, page):    # noqa: F811
    """Step 2 of the attention lesson asks which key row 1 weighs most: a click on a cell of the key row
    answers (Streamlit reports no click on a heatmap cell itself: the row carries clickable markers), and
    "Reveal" frames the model's answer and the student's pick in the row's weights."""
    url, root = server
    if root.name != "checkpoints":
        pytest.skip("the lesson uses the shipped checkpoint zh-en")
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import questions
    q = questions.ask("argmax_key", load_checkpoint(root / "zh-en"), "我是一名工程师。",
                      {"block": "encoder.self_attn", "layer": 0, "head": 0, "row": 1})
    pg = page
    pg.goto(f"{url}/?lesson=attention-step-by-step&step=2")
    box = pg.locator(".st-key-lesson_question")
    box.wait_for()
    settle(pg)
    box.locator(".js-plotly-plot .main-svg").first.wait_for()
    assert box.get_by_role("button", name="Reveal").is_disabled()
    pick = next(i for i in range(len(q.options)) if i != q.answer)         # a wrong key, to see both frames
    cell = box.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
    x, y = cell["x"] + cell["width"] * (pick + 0.5) / len(q.options), cell["y"] + cell["height"] / 2
    hover(pg, box, x, y)                                # plotly reports a click on the point it hovers
    pg.mouse.click(x, y)
    settle(pg)
    chosen = box.locator('[data-testid="stButtonGroup"] button[aria-checked="true"]')
    chosen.first.wait_for()
    assert chosen.inner_text() == q.options[pick]                          # the click chose that key's pill
    box.get_by_role("button", name="Reveal").click()
    box.get_by_text("the model's answer is").wait_for()
    settle(pg)
    assert q.options[q.answer] in box.inner_text()
    assert box.locator(".js-plotly-plot .main-svg").first.is_visible()
    no_exception(pg)
    box.screenshot(path=str(ARTIFACTS / "lesson-question-revealed.png"))
    assert pg.locator('[data-testid="stMain"] .st-key-lesson_panel').get_by_text(
        f"Step 2 of {len(lesson_file.load_lesson('attention-step-by-step').steps)}", exact=True).is_visible()
