"""Lesson questions in the lesson format and the app: the format checks a step's question and names the step and
the field, every shipped question computes on the shipped checkpoint, and a student answers and reveals one
(the class hook hears the answer; the reveal shows the model's answer and its figure)."""
from __future__ import annotations

import json

import pytest

from app_util import APP, ROOT, by_key, figures, open_app, texts
from streamlit.testing.v1 import AppTest
from viz_explorer.lessons import lesson_file, quiz
from viz_transformer import load_checkpoint
from viz_transformer.analysis import claims, questions

SHIPPED = lesson_file.list_lessons()         # every lesson in lessons/
ASKED = [(name, i) for name in SHIPPED for i, s in enumerate(lesson_file.load_lesson(name).steps) if s.question]


def _lesson(question: dict, **step) -> dict:
    return {"title": "t", "steps": [{"page": "step_by_step", "note": "n",
                                     "settings": {"block": "encoder.self_attn", "layer": 1, "head": 2, "row": 3},
                                     "question": question, **step}]}


@pytest.mark.parametrize("question, match", [
    ({"kind": "guess", "prompt": "?"}, r"step 1: question must be an object with a kind, one of argmax_key"),
    ({"kind": "argmax_key"}, r"step 1: question: prompt must be text"),
    ({"kind": "argmax_key", "prompt": "?", "step": 2}, r"step 1: question: argmax_key takes block, layer, head, row; not 'step'"),
    ({"kind": "argmax_key", "prompt": "?", "layer": -1}, r"step 1: question: setting 'layer' is -1"),
    ({"kind": "next_token", "prompt": "?", "step": 0}, r"step 1: question: 'step' is 0; it must be a decoding step"),
    ({"kind": "knockout_changes", "prompt": "?", "mode": "loud"}, r"'mode' is 'loud'; it must be zero, uniform or mean"),
    ({"kind": "head_role", "prompt": "?", "use": {"head": "nofact.head"}}, r"step 1: question: use 'head'"),
    ({"kind": "head_role", "prompt": {"fr": "?"}}, r"step 1: question: prompt must be text in en and/or zh"),
])
def test_bad_questions_name_the_step_and_the_field(question, match):
    with pytest.raises(ValueError, match=match):
        lesson_file.parse_lesson(_lesson(question), "x")


def test_a_question_s_arguments_come_from_the_step_then_its_own_then_the_facts():
    data = _lesson({"kind": "argmax_key", "prompt": {"en": "?", "zh": "？"}, "layer": 0,
                    "use": {"head": "f.head"}}, facts={"f": {"kind": "head_size"}})
    lesson = lesson_file.parse_lesson(data, "x")
    step = lesson.steps[0]
    assert lesson_file.question_args(step, {"f": {"head": 5}}) == {"block": "encoder.self_attn", "layer": 0,
                                                                   "head": 5, "row": 3}
    assert lesson_file.parse_lesson(json.loads(lesson.dumps()), "x") == lesson          # round trip
    assert "question" not in lesson_file.parse_lesson({"title": "t", "steps": [{"page": "lens", "note": "n"}]}).dumps()
    assert questions.params("next_token") == ("step",)
    assert lesson_file.question_args(lesson_file.parse_lesson(_lesson({"kind": "next_token", "prompt": "?"})).steps[0],
                                     {}) == {}                                       # the library's default step


@pytest.fixture(scope="module")
def shipped():
    """The shipped checkpoints the lessons open, loaded once."""
    class Models(dict):
        def __missing__(self, name):
            self[name] = load_checkpoint(ROOT / "checkpoints" / name)
            return self[name]
    return Models()


@pytest.mark.parametrize("name, i", ASKED)
def test_every_shipped_question_computes_on_the_shipped_checkpoint(shipped, name, i):
    lesson = lesson_file.load_lesson(name)
    step = lesson.steps[i]
    ckpt, text = lesson_file.model_and_text(lesson, i)
    values = {k: claims.evaluate(v["kind"], shipped[ckpt], text, {a: b for a, b in v.items() if a != "kind"}).values
              for k, v in step.facts.items()}
    q = questions.ask(step.question["kind"], shipped[ckpt], text, lesson_file.question_args(step, values))
    assert len(q.options) >= 2 and len(set(q.options)) == len(q.options) and 0 <= q.answer < len(q.options)
    assert set(step.question["prompt"]) == {"en", "zh"}
    if q.kind == "argmax_key":                                   # the evidence says the same as the answer
        w = q.evidence["weights"]
        assert w[q.evidence["best"]] == max(x for x, ok in zip(w, q.evidence["allowed"]) if ok)


def test_each_shipped_lesson_asks_at_least_two_questions_of_more_than_one_kind():
    for name in SHIPPED:
        assert sum(1 for n, _ in ASKED if n == name) >= 2
        lesson = lesson_file.load_lesson(name)
        assert 6 <= len(lesson.steps) <= 10, name
    kinds = {lesson_file.load_lesson(n).steps[i].question["kind"] for n, i in ASKED}
    assert kinds == set(questions.KINDS)                        # every kind is used by a shipped lesson


@pytest.fixture
def lessons(ckpt_root, tmp_path, monkeypatch):
    """A one-step lesson on the tiny translator that asks which key row 1 of encoder head (0, 1) weighs most."""
    (tmp_path / "quiz.json").write_text(json.dumps({"title": "quiz", "steps": [
        {"page": "step_by_step", "settings": {"checkpoint": "tiny-zh-en", "text": "我是一名工程师。",
                                              "block": "encoder.self_attn", "layer": 0, "head": 1, "row": 1},
         "note": "n", "question": {"kind": "argmax_key", "prompt": {"en": "Which key?", "zh": "哪个键？"}}}]}),
        encoding="utf-8")
    monkeypatch.setenv("VIZ_LESSONS", str(tmp_path))
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    return tmp_path


def test_a_student_answers_and_reveals_and_the_class_hook_hears_it(lessons, tiny_translator, monkeypatch):
    heard = []
    monkeypatch.setattr(quiz, "on_answer", [lambda *a: heard.append(a)])
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lesson"] = "quiz"
    at.run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Which key?" in texts(at)
    q = questions.ask("argmax_key", tiny_translator, "我是一名工程师。",
                      {"block": "encoder.self_attn", "layer": 0, "head": 1, "row": 1})
    pills = by_key(at.button_group, "qz_pick_quiz/1")
    assert list(pills.options) == q.options
    assert by_key(at.button, "qz_reveal_quiz/1").disabled                 # nothing to reveal before an answer
    wrong = next(o for i, o in enumerate(q.options) if i != q.answer)
    pills.set_value(wrong).run()
    assert heard == [("quiz/1", q.options, wrong)]
    assert at.session_state[quiz.STATE]["quiz/1"] == {"choice": wrong, "revealed": False}
    by_key(at.button, "qz_reveal_quiz/1").click().run()
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at)
    assert f"the model's answer is **{q.options[q.answer]}**" in shown.replace("\\", "")
    revealed = [f for f in figures(at) if f["layout"].get("shapes")]
    assert revealed and {s["line"]["color"] for s in revealed[0]["layout"]["shapes"]} == {"#d62728", "#ff7f0e"}
    by_key(at.button, "qz_again_quiz/1").click().run()
    assert at.session_state[quiz.STATE]["quiz/1"] == {"choice": None, "revealed": False}


def test_the_writer_adds_a_question_to_a_step(ckpt_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    at = open_app("viz_explorer/pages/step/step_by_step.py", ckpt="tiny-zh-en")
    by_key(at.selectbox, "ls_q_kind").set_value("head_role").run(timeout=60)
    by_key(at.text_input, "ls_q_zh").input("这个头在做什么？").run(timeout=60)
    by_key(at.button, "ls_save").click().run(timeout=60)
    step = lesson_file.parse_lesson({"title": "t", "steps": at.session_state["lesson_draft"]}).steps[0]
    assert step.question == {"kind": "head_role", "prompt": {"zh": "这个头在做什么？"}}
    args = lesson_file.question_args(step, {})
    assert set(args) == {"block", "layer", "head"} and args["block"] == step.settings["block"]
