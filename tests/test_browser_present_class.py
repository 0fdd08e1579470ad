""""Present this class" in Chromium at 1920x1080: the teacher presents a live class (`?teach=CODE&present=1`), two
students answer the step's question, the teacher reveals the answer (the students' pages show it, each told whether
they were right), reloads (the step, the counts and the reveal stay), moves the class with → and ← and the students
follow. On SQLite and on PostgreSQL. Screenshots of the presented class in both languages go to
test-artifacts/present-class/."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS

ROOT = Path(__file__).resolve().parent.parent
from stclient import Server

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
SHOTS = ARTIFACTS / "present-class"
PUBLIC = "http://192.0.2.10:8765"         # TEST-NET-1: the address the projected QR code shows
READY = ("() => { const r = document.querySelector('[data-test-script-state]');"
         " return r && r.getAttribute('data-test-script-state') === 'notRunning'"
         " && !document.querySelector('[data-testid=\"stSkeleton\"]'); }")
BARS = "() => { const p = document.querySelector('.js-plotly-plot'); return p && p.data ? Array.from(p.data[0].y) : null; }"
LESSON = "present-test"
TEXT, ARGS_Q = "我是一名工程师。", {"block": "encoder.self_attn", "layer": 0, "head": 1, "row": 1}
STEPS = [{"page": "attention", "settings": {"checkpoint": "tiny-zh-en", "text": TEXT},
          "question": {"kind": "argmax_key", **ARGS_Q,
                       "prompt": {"en": "Which piece does row 1 weigh most?", "zh": "第 1 行最看重哪个子词？"}},
          "note": {"en": "Row 1 of this head: predict, then look.", "zh": "这个头的第 1 行：先预测，再看。"}},
         {"page": "masks", "note": {"en": "The mask: no question, the check-in poll.", "zh": "掩码：没有题目，只有课堂反馈。"}},
         {"page": "positions", "note": {"en": "Positions.", "zh": "位置。"}}]


@pytest.fixture
def lessons(tmp_path) -> dict:
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / f"{LESSON}.json").write_text(json.dumps({"title": {"en": "Present test", "zh": "投影测试"},
                                                       "steps": STEPS}), "utf-8")
    return {"VIZ_LESSONS": str(folder)}


def settle(pg) -> None:
    pg.wait_for_timeout(400)
    pg.wait_for_function(READY, timeout=TIMEOUT_MS)
    pg.wait_for_timeout(300)


def new_page(browser, width: int, height: int):
    pg = browser.new_context(viewport={"width": width, "height": height}).new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    return pg


def counted(teacher, k: int, n: int, bars: list[int]) -> None:
    """The presented chart comes to show k of n answered and these bars, by itself."""
    teacher.locator('[data-testid="stMain"]').get_by_text(f"{k} of {n}", exact=True).wait_for()
    teacher.wait_for_function(f"() => JSON.stringify(({BARS})()) === '{json.dumps(bars, separators=(',', ':'))}'")


def pick(student, i: int) -> None:
    """The student picks option i of the step's question and sends it."""
    main = student.locator('[data-testid="stMain"]')
    main.locator('[data-testid="stRadio"] [role="radiogroup"] label').nth(i).click()
    main.get_by_role("button", name="Send").click()
    main.get_by_text("Your answer:").wait_for()


def shot(pg, name: str) -> None:
    """A screenshot of the screen as the projector shows it, scrolled to the top."""
    pg.locator('[data-testid="stMain"]').evaluate("m => m.scrollTo({top: 0, behavior: 'instant'})")
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(SHOTS / name))


def press(pg, key: str) -> None:
    pg.mouse.click(pg.viewport_size["width"] - 5, pg.viewport_size["height"] // 2)     # focus on the page
    pg.keyboard.press(key)


def test_presenting_a_class_two_steps_two_students_a_reveal_and_a_reload(db_url, ckpt_root, lessons):  # noqa: F811
    from playwright.sync_api import sync_playwright

    from viz_explorer.classroom import store as cr

    from viz_explorer.classroom import votes as cv
    from viz_explorer.server import db
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import questions
    SHOTS.mkdir(parents=True, exist_ok=True)
    q = questions.ask("argmax_key", load_checkpoint(ckpt_root / "tiny-zh-en"), TEXT, ARGS_Q)   # the library's answer
    right, wrong = q.answer, next(i for i in range(len(q.options)) if i != q.answer)
    kind = db_url.split(":")[0].split("+")[0]
    eng = db.engine(db_url)
    with Server(ROOT, ckpt_root, log=ARTIFACTS / f"present-class-{kind}.log",
                env={"VIZ_DATABASE_URL": db_url, "VIZ_PUBLIC_URL": PUBLIC, **lessons}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        teacher = new_page(browser, 1920, 1080)
        teacher.goto(f"{server.url}/live_class?lang=en")
        settle(teacher)
        teacher.get_by_role("button", name="Start a class").click()
        teacher.wait_for_url(re.compile(r"teach="))
        settle(teacher)
        code = re.search(r"teach=([A-Z0-9]{8})", teacher.url).group(1)
        teacher.get_by_role("button", name="Present this class").click()
        teacher.wait_for_url(re.compile(r"present=1"))
        main = teacher.locator('[data-testid="stMain"]')
        settle(teacher)
        main.get_by_role("button", name="Reveal the answer").wait_for()
        assert main.get_by_text("Row 1 of this head: predict, then look.").count() == 1      # the step's note
        assert main.get_by_text("Step 1 of 3", exact=True).count() >= 1
        assert main.get_by_text(code, exact=True).count() == 1                              # the code, its QR
        assert teacher.locator('[data-testid="stImage"] img').count() == 1
        assert main.get_by_text(f"{PUBLIC}/live_class?class={code}&lang=en").count() == 1
        figure = main.get_by_role("link", name="Open this step's figure").get_attribute("href")
        assert f"teach={code}" in figure and "present=1" in figure and "step=1" in figure

        join = f"{server.url}/live_class?class={code}&lang=en"
        students = [new_page(browser, 390, 844), new_page(browser, 1366, 768)]
        for s in students:
            s.goto(join)
            s.get_by_text("Step 1 of 3").first.wait_for()
            settle(s)
        counted(teacher, 0, 2, [0] * len(q.options))
        pick(students[0], right)
        pick(students[1], wrong)
        want = [int(i == right) + int(i == wrong) for i in range(len(q.options))]
        counted(teacher, 2, 2, want)

        main.get_by_role("button", name="Reveal the answer").click()
        answer = q.options[q.answer]
        main.get_by_text(f"The answer: {answer}.").wait_for()
        assert cv.revealed(code, f"{LESSON}/1", eng)
        students[0].get_by_text(f"The answer: {answer}. You got it right.").wait_for()       # within 3 s
        students[1].get_by_text(f"The answer: {answer}. You answered {q.options[wrong]}.").wait_for()
        with pytest.raises(cr.ClassError):                                                # no more answers
            cv.answer(code, re.search(r"me=([^&]+)", students[1].url).group(1), f"{LESSON}/1", answer,
                      list(q.options), eng)
        settle(teacher)
        shot(teacher, f"present-class-revealed-en-{kind}.png")

        teacher.reload()                                              # the view, the counts and the reveal stay
        settle(teacher)
        assert "present=1" in teacher.url and f"teach={code}" in teacher.url
        main.get_by_text(f"The answer: {answer}.").wait_for()
        counted(teacher, 2, 2, want)
        assert main.get_by_role("button", name="Reveal the answer").is_disabled()

        press(teacher, "ArrowRight")                                  # → moves the class
        main.get_by_text("Step 2 of 3", exact=True).first.wait_for()
        assert cr.lesson_and_step(code, eng) == (LESSON, 1)
        settle(teacher)
        assert main.get_by_role("button", name="Reveal the answer").count() == 0          # a poll has no answer
        for s, option in zip(students, ("Got it", "Lost")):
            s.get_by_text("Step 2 of 3").first.wait_for()             # the students follow by themselves
            settle(s)
            s.locator('[data-testid="stMain"]').get_by_text(option, exact=True).click()
            s.locator('[data-testid="stMain"]').get_by_role("button", name="Send").click()
            s.get_by_text(f"Your answer: {option}.").wait_for()
        counted(teacher, 2, 2, [1, 0, 1])
        settle(teacher)
        shot(teacher, f"present-class-step2-en-{kind}.png")

        zh = teacher.context.new_page()                               # the same browser, in Chinese
        zh.set_default_timeout(TIMEOUT_MS)
        zh.goto(f"{server.url}/live_class?teach={code}&present=1&lang=zh")
        zh.locator('[data-testid="stMain"]').get_by_text("第 2 步，共 3 步", exact=True).first.wait_for()
        settle(zh)
        shot(zh, f"present-class-step2-zh-{kind}.png")
        press(zh, "ArrowLeft")                                        # ← back to step 1: the reveal is still on
        zh.locator('[data-testid="stMain"]').get_by_text(f"答案：{answer}。").wait_for()
        assert cr.lesson_and_step(code, eng) == (LESSON, 0)
        settle(zh)
        shot(zh, f"present-class-revealed-zh-{kind}.png")
        for s in students:
            s.get_by_text("Step 1 of 3").first.wait_for()
            s.get_by_text(f"The answer: {answer}.").first.wait_for()
        for pg in (teacher, zh, *students):
            assert pg.locator('[data-testid="stException"]').count() == 0
        browser.close()
    db.dispose()
