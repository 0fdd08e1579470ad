"""The live class page in AppTest: a teacher starts a class (the secret in the teacher's session, in no address),
a browser without the right gets the teacher key's box (a wrong key, or the secret in an old `teacher=` link, acts on
nothing), a student's answer reaches the store, and a lesson question answered in a student's session
(viz_explorer/lessons/quiz.on_answer's seam) counts in their class."""
from __future__ import annotations

import secrets

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, page_file, texts
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.server import db
from viz_explorer.kit.widgets import md_escape

OPTS = ["got_it", "unsure", "lost"]


@pytest.fixture
def env(ckpt_root, tmp_path, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    monkeypatch.setenv("VIZ_DATABASE_URL", f"sqlite:///{tmp_path / 'viz.sqlite3'}")
    yield db.engine()
    db.dispose()


def param(at, key: str) -> str:
    v = at.query_params[key]
    return v[0] if isinstance(v, list) else v


def open_class(params: dict, teaching: tuple = ()) -> AppTest:
    """The live class page with this query; `teaching` = (code, secret): a session that holds the teacher's right
    (what "Start a class", the cookie or the typed key leave in it)."""
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state["ckpt"] = "tiny-zh-en"
    if teaching:
        at.session_state["lc_teach"] = tuple(teaching)
    at.run()
    at.switch_page(page_file("live_class"))
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_teacher_starts_a_class_and_no_address_has_the_secret(env):
    at = open_class({})
    at.button(key="lc_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    code, secret = at.session_state["lc_teach"]
    assert cr.is_teacher(code, secret, env) and cr.lesson_and_step(code, env)[1] == 0
    assert at.query_params.get("teach") in (code, [code]) and "class" not in at.query_params
    assert all(secret not in str(v) for v in at.query_params.values())
    codes = [c.value for c in at.code]
    assert f"/live_class?class={code}&lang=en" in codes and not any(secret in c for c in codes)  # join, Copy link
    assert [m.value for m in at.metric if m.label == "Answered"] == ["0 of 0"]
    at.button(key="lc_key_show").click().run()                       # the key, drawn only when asked for
    assert secret in [c.value for c in at.code]
    at.run()                                                         # and kept through a rerun (the live chart's)
    assert secret in [c.value for c in at.code]
    at.button(key="lc_key_hide").click().run()                       # folded again
    assert secret not in [c.value for c in at.code]


def test_the_teacher_page_without_the_right_asks_for_the_key(env):
    code, secret = cr.create_class("attention-step-by-step", env)
    for params in ({"teach": code}, {"teach": code, "teacher": secret}):     # an old link's secret: ignored
        at = open_class(params)
        assert "type your teacher key" in texts(at) and "teacher" not in at.query_params
        assert not at.metric and not at.get("plotly_chart") and not at.button(key="lc_key_go").disabled
        assert not [b for b in at.button if b.key in ("lc_next", "lc_back")]
    at.text_input(key="lc_key").input("x" * 24)
    at.button(key="lc_key_go").click().run()
    assert "not this class's teacher key" in texts(at) and not at.metric
    at.text_input(key="lc_key").input(secret)
    at.button(key="lc_key_go").click().run()
    assert [m.value for m in at.metric if m.label == "Answered"] == ["0 of 0"]
    at.button(key="lc_next").click().run()
    assert cr.lesson_and_step(code, env)[1] == 1


def test_a_student_answers(env):
    code, secret = cr.create_class("attention-step-by-step", env)
    at = open_class({"class": code})
    assert not at.metric and not at.get("plotly_chart")
    me = param(at, "me")                                     # a browser id was given
    assert cr.BROWSER_ID.match(me)
    at.radio(key="lc_pick_attention-step-by-step#1:check-in").set_value("lost")
    at.button(key="lc_send").click().run()
    assert "Your answer: Lost" in texts(at)
    assert cv.counts(code, secret, "attention-step-by-step#1:check-in", OPTS, env) == {"got_it": 0, "unsure": 0,
                                                                                        "lost": 1}
    other = open_class({"class": code})               # another student sends with nothing picked: a message
    other.button(key="lc_send").click().run()
    assert "Pick an answer first." in texts(other) and not other.exception
    assert sum(cv.counts(code, secret, "attention-step-by-step#1:check-in", OPTS, env).values()) == 1


def _quiz_script():
    import streamlit as st

    from viz_explorer.classroom import live_class
    live_class.remember()
    if st.button("answer", key="go"):
        live_class.record_quiz_answer("lesson#2:q", ["x", "y"], st.session_state.get("pick", "y"))


def test_a_lesson_question_answered_in_a_class_session_counts_in_the_class(env):
    code, secret = cr.create_class("attention-step-by-step", env)
    me, other = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
    cr.join(code, me, "", env)
    cr.join(code, other, "", env)
    runs = [({"class": code, "me": me}, "y"), ({"teach": code, "me": other}, "x"),                       # teacher
            ({}, "x"), ({"class": code, "me": "bad"}, "x")]                                            # no class
    for params, pick in runs:
        at = AppTest.from_function(_quiz_script)
        for k, v in params.items():
            at.query_params[k] = v
        at.session_state["pick"] = pick
        at.run()
        at.button(key="go").click().run()
        assert not at.exception, [e.value for e in at.exception]
    assert cv.counts(code, secret, "lesson#2:q", ["x", "y"], env) == {"x": 0, "y": 1}


def test_the_class_follows_the_teachers_lesson_tab(env):
    code, secret = cr.create_class("positions-and-masks", env)
    student_code, student_secret = cr.create_class("positions-and-masks", env)
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state["ckpt"] = "tiny-zh-en"
    at.session_state["lc_teach"] = (code, secret)               # the teacher's browser (its cookie)
    for k, v in {"lesson": "positions-and-masks", "step": "3", "teach": code}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert cr.lesson_and_step(code, env)[1] == 2                  # the lesson's step 3 (0-based 2)
    at.button(key="ls_next").click().run()
    assert cr.lesson_and_step(code, env)[1] == 3
    # a student's lesson tab, the teacher's lesson link in another browser, an old link's secret: nothing moves
    for params in ({"class": student_code, "me": secrets.token_urlsafe(12)}, {"teach": student_code},
                   {"class": student_code, "teacher": student_secret}, {"teach": student_code, "teacher": secret}):
        other = AppTest.from_file(APP, default_timeout=90)
        other.session_state["ckpt"] = "tiny-zh-en"
        for k, v in {"lesson": "positions-and-masks", "step": "4", **params}.items():
            other.query_params[k] = v
        other.run()
        assert not other.exception
    assert cr.lesson_and_step(student_code, env)[1] == 0


def test_refusals_speak_the_interfaces_language(env):
    at = open_class({"class": "nope", "lang": "zh"})
    assert "课堂码是 8 位字母和数字" in texts(at)                   # a malformed code, refused in Chinese
    missing = cr.new_code()
    at = open_class({"class": missing, "lang": "zh"})
    assert f"没有课堂 {missing}" in texts(at)
    at = open_class({"class": missing, "lang": "en"})
    assert f"There is no class {missing}" in texts(at)


QUIZ_LESSON = {"title": {"en": "Quiz in class"}, "steps": [
    {"page": "attention", "settings": {"checkpoint": "tiny-zh-en", "text": "我是一名工程师。"},
     "question": {"kind": "argmax_key", "block": "encoder.self_attn", "layer": 0, "head": 1, "row": 1,
                  "prompt": {"en": "Which piece does row 1 weigh most?", "zh": "第 1 行最看重哪个子词？"}},
     "note": {"en": "A step with a question."}},
    {"page": "masks", "note": {"en": "A step without one: the check-in poll."}}]}


def _quiz_hook_script():
    import streamlit as st

    from viz_explorer.classroom import live_class
    from viz_explorer.lessons import quiz
    live_class.remember()
    if st.button("answer", key="go"):          # what the lesson tab's quiz does when a student picks
        quiz.answer(st.session_state["qid"], st.session_state["options"], st.session_state["pick"])


def test_a_lesson_question_in_class_options_from_the_model(env, ckpt_root, tmp_path, monkeypatch):
    import json

    from viz_explorer.lessons import quiz
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import questions
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "quiz-in-class.json").write_text(json.dumps(QUIZ_LESSON), encoding="utf-8")
    monkeypatch.setenv("VIZ_LESSONS", str(tmp_path / "lessons"))
    # the options and answer, computed here straight from the library
    q = questions.ask("argmax_key", load_checkpoint(ckpt_root / "tiny-zh-en"), "我是一名工程师。",
                      {"block": "encoder.self_attn", "layer": 0, "head": 1, "row": 1})
    qid = quiz.question_id("quiz-in-class", 0)
    code, secret = cr.create_class("quiz-in-class", env)
    at = open_class({"class": code})
    pick = at.radio(key=f"lc_pick_{qid}")
    assert list(pick.options) == [md_escape(quiz.option_label(o)) for o in q.options]     # shown literally
    assert "Which piece does row 1 weigh most?" in texts(at)
    pick.set_value(q.options[q.answer])
    at.button(key="lc_send").click().run()
    assert not at.exception, [e.value for e in at.exception]
    # a second student answers in their lesson tab: the quiz's on_answer brings it to the class
    other = secrets.token_urlsafe(12)
    cr.join(code, other, "", env)
    tab = AppTest.from_function(_quiz_hook_script)
    tab.query_params["class"], tab.query_params["me"] = code, other
    wrong = next(o for i, o in enumerate(q.options) if i != q.answer)
    tab.session_state["qid"], tab.session_state["options"], tab.session_state["pick"] = qid, list(q.options), wrong
    tab.run()
    tab.button(key="go").click().run()
    assert not tab.exception, [e.value for e in tab.exception]
    want = {o: int(o == q.options[q.answer]) + int(o == wrong) for o in q.options}
    assert cv.counts(code, secret, qid, list(q.options), env) == want
    teacher = open_class({"teach": code}, teaching=(code, secret))
    spec = json.loads(teacher.get("plotly_chart")[0].proto.spec)
    assert [int(v) for v in spec["data"][0]["y"]] == [want[o] for o in q.options]
    teacher.button(key="lc_next").click().run()                  # step 2 has no question: the check-in poll
    assert "How well do you follow this step?" in texts(teacher)
