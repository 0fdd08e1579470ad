"""End-to-end, in Chromium: one teacher and three students through a lesson with two questions. The students
join (with the code, or the join link), answer; the teacher's chart and count follow without a reload; the
server is restarted and the counts are still there. On SQLite and on PostgreSQL."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, click_once, unfold

ROOT = Path(__file__).resolve().parent.parent
from stclient import Server, free_port
from viz_explorer.lessons.lesson_file import load_lesson

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
LABELS = {"got_it": "Got it", "unsure": "Not sure", "lost": "Lost"}
OPTS = list(LABELS)
N_STEPS = len(load_lesson("attention-step-by-step").steps)     # the class runs this lesson
READY = ("() => { const r = document.querySelector('[data-test-script-state]');"
         " return (!r || r.getAttribute('data-test-script-state') === 'notRunning')"
         " && !document.querySelector('[data-testid=\"stSkeleton\"]'); }")
BARS = "() => { const p = document.querySelector('.js-plotly-plot'); return p && p.data ? Array.from(p.data[0].y) : null; }"


def _ready(pg) -> None:
    pg.wait_for_timeout(300)
    pg.wait_for_function(READY)


def _answered(teacher, k: int, n: int, bars: list[int]) -> None:
    """The teacher's page comes to show k of n answered and these bars, by itself (no reload)."""
    from playwright.sync_api import expect
    main = teacher.locator('[data-testid="stMain"]')
    main.get_by_text(f"{k} of {n}", exact=True).first.wait_for()     # a rerun can leave the last step's line up a moment
    teacher.wait_for_function(f"() => JSON.stringify(({BARS})()) === '{json.dumps(bars, separators=(',', ':'))}'")
    _ready(teacher)
    expect(main.get_by_text(f"{k} of {n}", exact=True)).to_have_count(1)   # once settled, one count, this one


def _answer(student, option: str) -> None:
    from playwright.sync_api import expect
    _ready(student)
    box = student.locator('[data-testid="stMain"]')
    group = box.get_by_role("radiogroup", name="Your answer")
    expect(group).to_have_count(1)          # a step's rerun can leave the last step's group up for a moment
    group.get_by_text(LABELS[option], exact=True).click()
    box.get_by_role("button", name="Send").click()
    box.get_by_text(f"Your answer: {LABELS[option]}.").wait_for()


def test_a_class_through_two_questions_and_a_restart(db_url, ckpt_root, tmp_path):     # noqa: F811
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    port, env = free_port(), {"VIZ_DATABASE_URL": db_url}
    kind = db_url.split(":")[0].split("+")[0]
    server = Server(ROOT, ckpt_root, port=port, log=ARTIFACTS / f"class-server-{kind}.log", env=env).__enter__()
    pages = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                def new_page(width=1300):
                    pg = browser.new_context(viewport={"width": width, "height": 1500}).new_page()
                    pg.set_default_timeout(TIMEOUT_MS)
                    pages.append(pg)
                    return pg
                teacher = new_page()
                teacher.goto(f"{server.url}/live_class")
                _ready(teacher)
                teacher.get_by_role("button", name="Start a class").click()
                teacher.wait_for_url(re.compile(r"teach="))
                _ready(teacher)
                code = re.search(r"teach=([A-Z0-9]{8})", teacher.url).group(1)
                join = teacher.locator('[data-testid="stCode"]').first.inner_text().strip()
                unfold(teacher, "Your teacher key")              # the key, shown only when asked for
                box = teacher.locator('[data-testid="stExpander"]').filter(has_text="Your teacher key")
                click_once(box.get_by_role("button", name="Show the key"), box.locator('[data-testid="stCode"]'))
                secret = box.locator('[data-testid="stCode"]').first.inner_text().strip()
                click_once(box.get_by_role("button", name="Hide the key"),
                            box.get_by_role("button", name="Show the key"))
                assert secret not in teacher.url
                assert f"class={code}" in join and "teacher" not in join and secret not in join
                teacher.locator('[data-testid="stSidebar"]').get_by_role("button", name="Copy link").click()
                copied = teacher.locator('[data-testid="stPopoverBody"] [data-testid="stCode"]').first.inner_text()
                assert "teacher" not in copied and secret not in copied, copied        # "Copy link" never carries it
                teacher.keyboard.press("Escape")

                students = [new_page(900) for _ in range(3)]
                students[0].goto(f"{server.url}/live_class")                 # types the code
                _ready(students[0])
                students[0].get_by_role("textbox", name="Class code").fill(code.lower())
                students[0].get_by_role("button", name="Join").click()
                for s in students[1:]:                                       # open the join link
                    s.goto(join)
                for s in students:
                    s.get_by_text(f"Step 1 of {N_STEPS}").first.wait_for()
                    _ready(s)
                    assert secret not in s.content()
                hostile = "<b>Mei</b><img src=x>"
                students[1].get_by_label("Nickname", exact=True).fill(hostile)
                students[1].get_by_role("button", name="Save nickname").click()
                _ready(students[1])
                ids = [re.search(r"me=([^&]+)", s.url).group(1) for s in students]
                assert len(set(ids)) == 3

                step1 = ["got_it", "got_it", "lost"]
                _answered(teacher, 0, 3, [0, 0, 0])
                for s, o in zip(students, step1):
                    _answer(s, o)
                want1 = [Counter(step1)[o] for o in OPTS]
                _answered(teacher, 3, 3, want1)
                teacher.get_by_text("Who joined (3)").click()
                teacher.locator('[data-testid="stText"]').filter(has_text=hostile).first.wait_for()  # as text
                assert teacher.locator('[data-testid="stMain"] b').count() == 0
                teacher.screenshot(path=str(ARTIFACTS / f"class-teacher-1-{kind}.png"), full_page=True)

                click_once(teacher.get_by_role("button", name="Next step"),
                            teacher.locator('[data-testid="stMain"]').get_by_text(f"Step 2 of {N_STEPS}", exact=True))
                step2 = ["unsure", "lost", "unsure"]
                for s, o in zip(students, step2):
                    s.get_by_text(f"Step 2 of {N_STEPS}").first.wait_for()           # the students follow by themselves
                    _answer(s, o)
                want2 = [Counter(step2)[o] for o in OPTS]
                _answered(teacher, 3, 3, want2)
                students[2].screenshot(path=str(ARTIFACTS / f"class-student-{kind}.png"))

                server.proc.kill()                                           # the server dies mid-class
                server.proc.wait(timeout=20)
                server = Server(ROOT, ckpt_root, port=port, log=ARTIFACTS / f"class-server2-{kind}.log",
                                env=env).__enter__()
                teacher.reload()                                             # the right is in the browser's cookie
                _ready(teacher)
                _answered(teacher, 3, 3, want2)                              # step 2's answers are all there
                click_once(teacher.get_by_role("button", name="Previous step"),
                            teacher.locator('[data-testid="stMain"]').get_by_text(f"Step 1 of {N_STEPS}", exact=True))
                _answered(teacher, 3, 3, want1)                              # and step 1's
                # a student who did nothing: the page reconnected to the new server by itself and follows the class
                students[1].get_by_text(f"Step 1 of {N_STEPS}").first.wait_for(timeout=120_000)
                teacher.screenshot(path=str(ARTIFACTS / f"class-teacher-2-{kind}.png"), full_page=True)
                students[0].reload()                                         # a student comes back: same id, same answer
                students[0].get_by_text(f"Step 1 of {N_STEPS}").first.wait_for()
                students[0].get_by_text(f"Your answer: {LABELS[step1[0]]}.").wait_for()
                assert re.search(r"me=([^&]+)", students[0].url).group(1) == ids[0]
                for pg in pages:
                    assert pg.locator('[data-testid="stException"]').count() == 0
                browser.close()
            except Exception:
                for i, pg in enumerate(pages):                               # what each page showed when it failed
                    pg.screenshot(path=str(ARTIFACTS / f"class-failed-{kind}-{i}.png"), full_page=True)
                raise
    finally:
        server.__exit__()
