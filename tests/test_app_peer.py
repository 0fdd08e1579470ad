"""Peer instruction and concept checks on the live class page (AppTest): the teacher puts the class on a concept
check, asks it as "vote, discuss, vote again"; until the teacher shows the results neither a student's page nor the
teacher's projected page draws them (checked in the pages' output, not only the store); then both votes side by
side with who moved; the reveal tells each student whether each vote was right; in Chinese too."""
from __future__ import annotations

import json
import secrets

from streamlit.testing.v1 import AppTest

from app_util import texts
from test_app_class import env, open_class  # noqa: F401  (env: a fixture)
from viz_explorer.classroom import bank
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv


def page(params: dict, teaching: tuple = ()) -> AppTest:
    return open_class(params, teaching)


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def test_a_peer_instruction_question_from_vote_to_reveal(env):
    code, secret = cr.create_class("attention-step-by-step", env)
    checks = bank.load_bank("concept-checks")
    q = checks.half("a")[0]
    qid, right = checks.class_id(q), q.letters[q.answer]
    wrong = next(x for x in q.letters if x != right)
    students = [secrets.token_urlsafe(12) for _ in range(3)]
    for b in students:
        cr.join(code, b, "", env)
    teacher = page({"teach": code, "lang": "en"}, (code, secret))
    click(teacher, "lc_check_pre")
    assert cv.focus(code, env) == qid
    teacher.button_group(key=f"lc_mode_{qid}").set_value("peer").run()        # the question's mode, in the store
    assert cv.state(code, qid, env).peer and not teacher.exception
    for b, c in zip(students, (wrong, wrong, right)):
        cv.answer(code, b, qid, c, list(q.letters), env)
    student = page({"class": code, "me": students[0], "lang": "en"})
    assert "Concept check" in texts(student) and "Vote 1 is open." in texts(student)
    assert not charts(student)                                    # hidden from the student
    teacher.run()
    assert not charts(teacher) and "hidden until you show them" in texts(teacher)     # and from the projected page
    assert [m.value for m in teacher.metric if m.label == "Answered"] == ["3 of 3"]
    assert [m.value for m in teacher.metric if m.label == "Check before the lesson"] == [
        f"Question 1 of {len(checks.half('a'))}"]                    # where in the check, not the lesson's step
    click(teacher, "lc_close")
    student.run()
    assert "Vote 1 is closed. Discuss your answer with a neighbour." in texts(student) and not charts(student)
    click(teacher, "lc_again")
    for b in students[:2]:
        cv.answer(code, b, qid, right, list(q.letters), env)      # two move to the right answer
    student.run()
    assert "Vote 2 is open." in texts(student) and not charts(student)
    teacher.run()
    assert not charts(teacher)
    click(teacher, "lc_show")
    student.run()
    (shown,) = charts(student)
    assert [tr["name"] for tr in shown["data"]] == ["Vote 1 (alone)", "Vote 2 (after discussion)"]
    i = q.letters.index(right)
    assert [shown["data"][0]["y"][i], shown["data"][1]["y"][i]] == [1, 2]   # the third did not vote again
    (both,) = charts(teacher)
    assert both["data"][1]["y"][i] == 2
    assert "Of 2 students who voted twice, 2 moved to the right answer and 0 away from it." in texts(teacher)
    click(teacher, "lc_reveal")
    student.run()
    assert "The answer:" in texts(student) and "You got it right." in texts(student)
    zh = page({"class": code, "me": students[2], "lang": "zh"})
    assert "答案已公布。" in texts(zh) and "概念检测" in texts(zh)


def test_a_student_cannot_vote_when_the_round_is_closed(env):
    code, secret = cr.create_class("attention-step-by-step", env)
    student = page({"class": code, "lang": "en"})
    qid = "attention-step-by-step#1:check-in"
    cv.close_round(code, secret, qid, env)
    student.run()
    assert student.radio(key=f"lc_pick_{qid}").disabled and student.button(key="lc_send").disabled
    cv.open_round(code, secret, qid, env, round=1, seconds=45)
    student.run()
    assert not student.button(key="lc_send").disabled
    assert countdown(student) in ("45 seconds left.", "44 seconds left.")     # ticked down by the browser
    cv.close_round(code, secret, qid, env)
    student.run()
    assert countdown(student) is None


def countdown(at: AppTest):
    """The countdown line a student's box shows when it is drawn, as class_watch.js writes it (None: no countdown)."""
    (w,) = [json.loads(e.proto.json) for e in at.get("bidi_component") if e.proto.component_name.endswith("class_watch")]
    if w["left"] is None:
        return None
    return w["one"] if w["left"] == 1 else w["other"].replace("{sec}", str(w["left"]))


def test_a_teachers_own_bank_written_in_the_app_is_asked_in_a_class(env, tmp_path, monkeypatch):
    start = page({"lang": "en"})
    fields = {"bw_concept": "heads", "bw_prompt_en": "How many heads has a model of d_model 64 with heads of 16?",
              "bw_opt_en_0": "2", "bw_opt_en_1": "4", "bw_opt_en_2": "64", "bw_figure_en": "the head selector"}
    for key, value in fields.items():
        (start.text_area if key.startswith("bw_prompt") else start.text_input)(key=key).input(value)
    start.radio(key="bw_answer").set_value(1)
    click(start, "bw_add")
    assert "1 question in your draft." in texts(start) and start.get("download_button")
    draft = start.session_state["bw_draft"]
    folder = tmp_path / "banks"
    folder.mkdir()
    from viz_explorer.classroom import bank_writer
    (folder / "mine.json").write_text(bank_writer.bank_text({"en": "Mine"}, draft), encoding="utf-8")
    monkeypatch.setenv("VIZ_QUESTIONS", str(folder))
    code, secret = cr.create_class("attention-step-by-step", env)
    teacher = page({"teach": code, "lang": "en"}, (code, secret))
    assert teacher.selectbox(key="lc_bank").options == ["mine"]
    click(teacher, "lc_check_other")
    assert cv.focus(code, env) == "check/mine/heads-1"
    me = secrets.token_urlsafe(12)
    cr.join(code, me, "", env)
    student = page({"class": code, "me": me, "lang": "en"})
    assert "How many heads has a model" in texts(student)
    student.radio(key="lc_pick_check/mine/heads-1").set_value("B")
    click(student, "lc_send")
    assert cv.my_answer(code, me, "check/mine/heads-1", env) == "B"
