"""A live class in a real room, in Chromium: the join link and its QR code point at VIZ_PUBLIC_URL although the
teacher opened the app on 127.0.0.1 (the QR code read back from its image); without the setting the teacher is told,
in one line, in both languages; and no address the teacher's projected page or a student's page ever shows lets a
fresh browser act as the teacher (the right lives in the teacher's session and cookie), while the teacher's own
reload keeps it and the teacher key typed into another browser gives it back."""
from __future__ import annotations

import io
import json
import re
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from db_util import db_url, pg_cluster  # noqa: F401  (fixtures)
from browser_util import ARGS, ARTIFACTS, CHROMIUM, READY, TIMEOUT_MS, click_once, unfold

ROOT = Path(__file__).resolve().parent.parent
from stclient import Server, free_port

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
PUBLIC = "http://192.0.2.10:8765/viz"         # TEST-NET-1: an address no test machine is
WARN = {"en": "Phones cannot open this address", "zh": "手机打不开这个地址"}
BATCH = 4                     # fresh browsers that open their addresses at once
TEACHER_BUTTONS = ("Next step", "Previous step", "Run the class")    # the last one is the key's box: not acting
LESSON = "room-test"          # three plain steps (the check-in poll): the test needs no model-computed facts
STEPS = [{"page": page, "note": {"en": f"Step on {page}.", "zh": f"{page} 这一步。"}}
         for page in ("masks", "positions", "masks")]


@pytest.fixture(scope="module")
def lessons(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("lessons")
    (folder / f"{LESSON}.json").write_text(json.dumps({"title": {"en": "Room test"}, "steps": STEPS}), "utf-8")
    return {"VIZ_LESSONS": str(folder)}


def loaded(pg) -> None:
    """After goto or reload, a new document starts in the "initial" script state, so READY waits for its first run;
    after an action, once what it brings has shown (a live class page's fragment reruns by itself, so a rerun's
    start is no sign of the action's), READY waits for that run to end."""
    pg.wait_for_function(READY, timeout=TIMEOUT_MS)


def new_page(browser, width=1366, height=768):
    pg = browser.new_context(viewport={"width": width, "height": height}).new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    return pg


def start_class(pg, url: str) -> str:
    """The teacher starts a class on the first lesson; its code."""
    pg.goto(url)
    loaded(pg)
    pg.get_by_role("button", name="Start a class").click()
    pg.wait_for_url(re.compile(r"teach="))
    pg.get_by_role("button", name="Next step").wait_for()
    loaded(pg)
    return re.search(r"teach=([A-Z0-9]{8})", pg.url).group(1)


def qr_text(pg) -> str:
    """What the page's QR code says, read back from the PNG the browser was sent."""
    from PIL import Image
    src = pg.locator('[data-testid="stImage"] img').first.get_attribute("src")
    image = Image.open(io.BytesIO(pg.request.get(urljoin(pg.url, src)).body())).convert("L")
    import zxingcpp                                   # requirements-dev.txt: a decoder independent of segno
    found = zxingcpp.read_barcodes(image)
    assert len(found) == 1, found
    return found[0].text


def test_the_qr_code_holds_the_public_address(ckpt_root, lessons):
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    with Server(ROOT, ckpt_root, port=free_port(), log=ARTIFACTS / "class-public.log",
                env={"VIZ_PUBLIC_URL": PUBLIC + "/", **lessons}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        teacher = new_page(browser)
        assert server.url.startswith("http://127.0.0.1:")
        code = start_class(teacher, f"{server.url}/live_class?lang=en")
        join = f"{PUBLIC}/live_class?class={code}&lang=en"
        assert qr_text(teacher) == join
        assert join in teacher.locator('[data-testid="stCode"]').all_inner_texts()
        assert teacher.get_by_text(WARN["en"]).count() == 0
        browser.close()


@pytest.fixture(scope="module")
def loopback(ckpt_root, lessons):
    """A server without VIZ_PUBLIC_URL, for both languages' tests (a class each: they share nothing else)."""
    ARTIFACTS.mkdir(exist_ok=True)
    with Server(ROOT, ckpt_root, log=ARTIFACTS / "class-loopback.log", env={"VIZ_PUBLIC_URL": "", **lessons}) as server:
        yield server


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_without_the_setting_a_loopback_teacher_is_warned(lang, loopback):
    from playwright.sync_api import sync_playwright
    server = loopback
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        teacher = new_page(browser)
        teacher.goto(f"{server.url}/live_class?lang={lang}")
        loaded(teacher)
        teacher.get_by_role("button", name={"en": "Start a class", "zh": "开始上课"}[lang]).click()
        teacher.wait_for_url(re.compile(r"teach="))
        warning = teacher.locator('[data-testid="stAlert"]').filter(has_text=WARN[lang])
        warning.wait_for()
        loaded(teacher)
        assert warning.count() == 1 and "VIZ_PUBLIC_URL" in warning.inner_text()
        code = re.search(r"teach=([A-Z0-9]{8})", teacher.url).group(1)
        assert qr_text(teacher) == f"{server.url}/live_class?class={code}&lang={lang}"
        teacher.screenshot(path=str(ARTIFACTS / f"class-teacher-loopback-{lang}.png"))
        browser.close()


def addresses(pg, copy_link: bool = True) -> set[str]:
    """Every address the page shows or links to: its own, each link's, each code block that is one (the join link,
    "Copy link"), the QR code's."""
    got = {pg.url, *pg.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")}
    button = pg.locator('[data-testid="stSidebar"]').get_by_role("button", name="Copy link")
    if copy_link and button.count() and pg.viewport_size["width"] > 800:      # a phone's sidebar is folded away
        button.click()
        pg.locator('[data-testid="stPopoverBody"] [data-testid="stCode"]').first.wait_for()
        got |= set(pg.locator('[data-testid="stPopoverBody"] [data-testid="stCode"]').all_inner_texts())
        pg.keyboard.press("Escape")
    got |= {c for c in pg.locator('[data-testid="stMain"] [data-testid="stCode"]').all_inner_texts() if "?" in c}
    if pg.locator('[data-testid="stImage"] img').count():
        got.add(qr_text(pg))
    return {urljoin(pg.url, a.strip()) for a in got}


@pytest.mark.walk          # every address either page shows, each in a fresh browser
def test_no_shown_address_lets_a_student_act_as_the_teacher(db_url, ckpt_root, lessons):     # noqa: F811
    from playwright.sync_api import sync_playwright

    from viz_explorer.classroom import store as cr
    from viz_explorer.server import db
    ARTIFACTS.mkdir(exist_ok=True)
    kind = db_url.split(":")[0].split("+")[0]
    eng = db.engine(db_url)
    with Server(ROOT, ckpt_root, log=ARTIFACTS / f"class-access-{kind}.log",
                env={"VIZ_DATABASE_URL": db_url, "VIZ_PUBLIC_URL": "", **lessons}) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        teacher = new_page(browser)
        code = start_class(teacher, f"{server.url}/live_class?lang=en")
        seen = addresses(teacher)                                    # the projected page, as started
        unfold(teacher, "Your teacher key")
        box = teacher.locator('[data-testid="stExpander"]').filter(has_text="Your teacher key")
        key = box.locator('[data-testid="stCode"]').first
        click_once(box.get_by_role("button", name="Show the key"), key)
        secret = key.inner_text().strip()
        assert cr.is_teacher(code, secret, eng)
        click_once(box.get_by_role("button", name="Hide the key"),  # folded again before projecting
                    box.get_by_role("button", name="Show the key"))
        click_once(teacher.get_by_role("button", name="Next step"), teacher.get_by_text("Step 2 of 3").first)
        loaded(teacher)
        seen |= addresses(teacher)
        teacher.reload()                                             # the teacher's reload keeps the right
        loaded(teacher)
        teacher.get_by_role("button", name="Next step").wait_for()
        now = addresses(teacher)
        seen |= now
        lesson_tab = next(a for a in now if "lesson=" in a and "teach=" in a)     # at the class's step 2
        tab = teacher.context.new_page()                             # the teacher's lesson tab, same browser
        tab.goto(lesson_tab)
        loaded(tab)
        seen |= addresses(tab)
        tab.close()

        join = f"{server.url}/live_class?class={code}&lang=en"
        assert join in seen
        students = [new_page(browser, 390, 844), new_page(browser)]
        students[0].goto(join)
        students[1].goto(f"{server.url}/live_class")
        loaded(students[1])
        students[1].get_by_role("textbox", name="Class code").fill(code)
        students[1].get_by_role("button", name="Join").click()
        for s in students:
            s.get_by_text("Step 2 of 3").first.wait_for()
            loaded(s)
            assert secret not in s.content()
            seen |= addresses(s)
            s.goto(next(a for a in addresses(s, copy_link=False) if "lesson=" in a))   # their lesson tab
            loaded(s)
            seen |= addresses(s)
        assert not [a for a in seen if secret in a], "an address carries the teacher's secret"
        assert cr.lesson_and_step(code, eng) == (LESSON, 1)

        # each address once without its #fragment (an anchor on the page: the browser never sends it to the server)
        ours = sorted({urldefrag(a).url for a in seen if urlsplit(a).netloc == urlsplit(server.url).netloc})
        assert any("teach=" in a for a in ours) and any("class=" in a for a in ours)
        if kind != "sqlite":          # the store's other engine: the addresses that name the class as its teacher
            ours = [a for a in ours if "teach=" in a]     # (every address, on SQLite: the pages read the store alike)
        fresh = []                    # a student's fresh browser opens each, BATCH at a time (their loads overlap)
        for address in ours:
            if not fresh:
                fresh = [(a, new_page(browser)) for a in ours[ours.index(address):][:BATCH]]
                for a, pg in fresh:
                    pg.goto(a, wait_until="commit")
            assert fresh[0][0] == address
            pg = fresh.pop(0)[1]
            loaded(pg)
            main = pg.locator('[data-testid="stMain"]')
            for name in TEACHER_BUTTONS[:2]:
                assert main.get_by_role("button", name=name, exact=True).count() == 0, (address, name)
            assert main.get_by_text("Answered", exact=True).count() == 0, address          # the teacher's counts
            if main.get_by_role("button", name="Run the class").count():                   # guessing the key
                main.get_by_label("Teacher key").fill("A" * 24)
                main.get_by_role("button", name="Run the class").click()
                main.get_by_text("not this class's teacher key").wait_for()
            if pg.get_by_role("button", name="Next lesson step").count():                 # walking the lesson
                panel = pg.locator(".st-key-lesson_panel")
                i = int(re.search(r"Step (\d) of 3", panel.inner_text()).group(1))
                pg.get_by_role("button", name="Next lesson step").first.click()
                panel.get_by_text(f"Step {i + 1} of 3", exact=True).wait_for()    # the click's rerun has run
                loaded(pg)
            assert pg.locator('[data-testid="stException"]').count() == 0, address
            pg.context.close()
            assert cr.lesson_and_step(code, eng) == (LESSON, 1), address  # nobody moved it

        other = new_page(browser)                                    # the teacher's second device: the key
        other.goto(f"{server.url}/live_class?teach={code}&lang=en")
        loaded(other)
        other.get_by_label("Teacher key").fill(secret)
        other.get_by_role("button", name="Run the class").click()
        click_once(other.get_by_role("button", name="Next step"), other.get_by_text("Step 3 of 3").first)
        assert cr.lesson_and_step(code, eng) == (LESSON, 2)
        assert secret not in other.url
        browser.close()
    db.dispose()
