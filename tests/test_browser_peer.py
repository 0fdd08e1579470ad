"""End-to-end, in Chromium: a teacher (a laptop) and three phones run one concept-check question through peer
instruction (vote, discuss, vote again, show, reveal), in English and in Chinese, and the teacher downloads the
report; a screenshot of the teacher's page and a phone at each stage (test-artifacts/peer-*.png)."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM, TIMEOUT_MS, click_once, unfold, download, settle
from stclient import Server, free_port
from test_browser_phone import PHONE_UA
from viz_explorer.classroom import bank
from viz_explorer.kit.strings import EN, ZH

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
CHECKS = bank.load_bank("concept-checks")
Q = CHECKS.half("a")[0]                     # the first question of the check before the lesson
RIGHT = Q.answer
WRONG = (RIGHT + 1) % len(Q.options)


def _vote(phone, words, index: int) -> None:
    main = phone.locator('[data-testid="stMain"]')
    group = main.get_by_role("radiogroup")
    group.locator("label").nth(index).click()
    main.get_by_role("button", name=words["lc.send"]).click()
    main.get_by_text(re.compile("^" + re.escape(words["lc.sent"].split("{")[0]))).first.wait_for()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_peer_instruction_on_three_phones_and_the_report(lang, ckpt_root, tmp_path):
    from playwright.sync_api import expect, sync_playwright
    words = EN if lang == "en" else {**EN, **ZH}
    ARTIFACTS.mkdir(exist_ok=True)
    env = {"VIZ_DATABASE_URL": f"sqlite:///{tmp_path / 'viz.sqlite3'}"}
    server = Server(ROOT, ckpt_root, port=free_port(), log=ARTIFACTS / f"peer-server-{lang}.log", env=env).__enter__()
    pages = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                def new_page(w, h, **kw):
                    pg = browser.new_context(viewport={"width": w, "height": h}, **kw).new_page()
                    pg.set_default_timeout(TIMEOUT_MS)
                    pages.append(pg)
                    return pg

                def shots(stage):                  # the question's part of each page (the main area scrolls)
                    teacher.locator('[data-testid="stMetric"]').first.scroll_into_view_if_needed()
                    teacher.screenshot(path=str(ARTIFACTS / f"peer-{lang}-{stage}-teacher.png"))
                    last = phones[0].locator('[data-testid="stPlotlyChart"], [data-testid="stAlert"]')
                    (last.last if last.count() else phones[0].get_by_role("button", name=words["lc.send"])) \
                        .scroll_into_view_if_needed()
                    phones[0].screenshot(path=str(ARTIFACTS / f"peer-{lang}-{stage}-phone.png"))

                teacher = new_page(1366, 768, accept_downloads=True)
                teacher.goto(f"{server.url}/live_class?lang={lang}")
                settle(teacher)
                teacher.get_by_role("button", name=words["lc.start"]).click()
                teacher.wait_for_url(re.compile(r"teach="))
                settle(teacher)
                code = re.search(r"teach=([A-Z0-9]{8})", teacher.url).group(1)
                main = teacher.locator('[data-testid="stMain"]')
                unfold(teacher, words["ck.title"])
                click_once(main.get_by_role("button", name=words["ck.start.pre"]),
                            main.get_by_text(re.compile(re.escape(words["ck.on"].split("{")[0]))).first)
                click_once(main.get_by_text(words["pi.mode.peer"]).first,         # the question's mode, stored:
                            main.get_by_role("button", name=words["pi.again"]))      # "Vote again" appears
                settle(teacher)
                phones = [new_page(390, 844, user_agent=PHONE_UA, is_mobile=True, has_touch=True) for _ in range(3)]
                for ph in phones:
                    ph.goto(f"{server.url}/live_class?class={code}&lang={lang}")
                    ph.get_by_text(words["ck.student_on"]).first.wait_for()
                    settle(ph)
                for ph, i in zip(phones, (WRONG, WRONG, RIGHT)):
                    _vote(ph, words, i)
                main.get_by_text(words["lc.answered_n"].format(k=3, n=3)).first.wait_for()
                assert teacher.locator('[data-testid="stPlotlyChart"]').count() == 0      # hidden on the projector
                assert all(ph.locator('[data-testid="stPlotlyChart"]').count() == 0 for ph in phones)
                shots("1-vote")

                click_once(main.get_by_role("button", name=words["pi.close"]),
                            main.get_by_role("button", name=words["pi.close"]).and_(teacher.locator("[disabled]")))
                closed = words["pi.state.closed"].format(n=1)
                phones[0].get_by_text(re.compile(re.escape(closed))).first.wait_for()
                shots("2-discuss")

                click_once(main.get_by_role("button", name=words["pi.again"]),
                            main.get_by_text(re.compile(re.escape(words["pi.state.open"].format(n=2)))).first)
                for ph in phones[:2]:
                    ph.get_by_text(re.compile(re.escape(words["pi.state.open"].format(n=2)))).first.wait_for()
                    settle(ph)
                    _vote(ph, words, RIGHT)
                main.get_by_text(words["lc.answered_n"].format(k=2, n=3)).first.wait_for()
                assert teacher.locator('[data-testid="stPlotlyChart"]').count() == 0
                shots("3-revote")

                click_once(main.get_by_role("button", name=words["pi.show"]),
                            teacher.locator('[data-testid="stPlotlyChart"] .main-svg').first)
                moved = words["pi.moved"].split("{")[0]
                main.get_by_text(re.compile(re.escape(moved))).first.wait_for()
                phones[0].locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
                shots("4-shown")

                click_once(main.get_by_role("button", name=words["lc.reveal"]),
                            main.get_by_text(words["pi.state.revealed"]).first)
                phones[2].get_by_text(re.compile(re.escape(words["lc.answer_right"].split("*")[0]))).first.wait_for()
                phones[0].get_by_text(re.compile(re.escape(words["lc.answer_right"].split("*")[0]))).first.wait_for()
                shots("5-revealed")

                unfold(teacher, words["gn.title"])
                got = download(teacher, main.get_by_role("button", name=words["gn.csv"]))
                rows = list(csv.DictReader(io.StringIO(Path(got.path()).read_text(encoding="utf-8"))))
                letters = Q.letters
                assert sorted((r["round"], r["choice"]) for r in rows) == sorted(
                    [("1", letters[WRONG]), ("1", letters[WRONG]), ("1", letters[RIGHT]),
                     ("2", letters[RIGHT]), ("2", letters[RIGHT])])
                assert {r["right"] for r in rows if r["choice"] == letters[RIGHT]} == {"1"}
                teacher.screenshot(path=str(ARTIFACTS / f"peer-{lang}-6-report-teacher.png"), full_page=True)
                for pg in pages:
                    expect(pg.locator('[data-testid="stException"]')).to_have_count(0)
                browser.close()
            except Exception:
                for i, pg in enumerate(pages):
                    pg.screenshot(path=str(ARTIFACTS / f"peer-failed-{lang}-{i}.png"), full_page=True)
                raise
    finally:
        server.__exit__()
