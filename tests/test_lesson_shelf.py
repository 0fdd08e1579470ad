"""The lesson shelf: every lesson file listed with its counts read back from the JSON itself (steps, steps with a
question, the languages every text has), a broken file said in one line beside the others, Open walks the lesson
from its first step, and "Start a class with it" makes this session the teacher of a class on that lesson."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, ROOT, md_unescape, page_file, texts
from viz_explorer.classroom import store as cr
from viz_explorer.lessons import shelf
from viz_explorer.server import db

from test_app_class import env  # noqa: F401  (the tiny models and a database of the test's own)


def by_hand(path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    texts_ = [data["title"]] + [s["note"] for s in data["steps"]] + \
        [s["question"]["prompt"] for s in data["steps"] if s.get("question")]
    return {"steps": len(data["steps"]), "questions": sum(1 for s in data["steps"] if s.get("question")),
            "languages": tuple(lang for lang in ("en", "zh") if all(lang in t for t in texts_)),
            "chapter": data.get("chapter", {})}


def test_the_shelf_counts_every_shipped_lesson_as_its_file_says():
    rows = shelf.shelf()
    files = sorted((ROOT / "lessons").glob("*.json"))
    assert [r.name for r in rows] == [f.stem for f in files]
    for row, f in zip(rows, files):
        assert row.error is None
        assert {"steps": row.steps, "questions": row.questions, "languages": row.languages,
                "chapter": row.chapter} == by_hand(f)
        assert row.chapter, f"{f.name} names no tutorial chapter"


def test_a_broken_file_is_one_line_and_the_others_stay(tmp_path):
    (tmp_path / "good.json").write_text(json.dumps({"title": {"en": "Good"}, "steps": [
        {"page": "overview", "note": {"en": "hi"}}]}), encoding="utf-8")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    rows = {r.name: r for r in shelf.shelf(tmp_path)}
    assert rows["good"].error is None and rows["good"].languages == ("en",) and rows["good"].steps == 1
    assert rows["bad"].error and "\n" not in rows["bad"].error and "not valid JSON" in rows["bad"].error


def open_shelf(lang: str = "en") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["lang"] = lang
    at.session_state["ckpt"] = "tiny-zh-en"
    at.run()
    at.switch_page(page_file("lessons")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_lists_each_lesson_with_its_chapter(env, lang):
    at = open_shelf(lang)
    shown = md_unescape(texts(at))
    for row in shelf.shelf():
        assert row.title[lang] in shown and row.chapter[lang] in shown
    assert len([b for b in at.button if b.key and b.key.startswith("sh_open_")]) == len(shelf.shelf())


def test_open_walks_the_lesson_from_its_first_step(env):
    at = open_shelf()
    at.button(key="sh_open_attention-step-by-step").click().run()
    at.run()                                                           # the pending step switches to its page
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["lesson"] == {"name": "attention-step-by-step", "step": 0}
    assert at.query_params["lesson"] in ("attention-step-by-step", ["attention-step-by-step"])


def test_start_a_class_makes_this_session_its_teacher(env):
    at = open_shelf()
    at.button(key="sh_class_positions-and-masks").click().run()
    assert not at.exception, [e.value for e in at.exception]
    code, secret = at.session_state["lc_teach"]
    assert cr.is_teacher(code, secret, env)
    assert cr.lesson_and_step(code, env) == ("positions-and-masks", 0)
    assert at.query_params["teach"] in (code, [code])


@pytest.fixture
def shipped_env(tmp_path, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("VIZ_DATABASE_URL", f"sqlite:///{tmp_path / 'viz.sqlite3'}")
    yield db.engine()
    db.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("name", [r.name for r in shelf.shelf()])
def test_a_class_runs_every_lesson_to_its_last_step(shipped_env, name):
    """The teacher starts a class on the lesson from the shelf and steps it to the end: every step's page opens,
    the class follows (lesson_and_step), and nothing raises."""
    from viz_explorer.lessons import lesson_file
    at = open_shelf()
    at.button(key=f"sh_class_{name}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    code, _ = at.session_state["lc_teach"]
    at.switch_page(page_file("live_class"))             # AppTest follows st.switch_page's page, not its address
    at.query_params["teach"] = code
    at.run()
    for i in range(1, len(lesson_file.load_lesson(name).steps)):
        at.button(key="lc_next").click().run()
        assert not at.exception, (name, i, [e.value for e in at.exception])
        assert cr.lesson_and_step(code, shipped_env) == (name, i)


def test_the_docs_list_every_lesson_with_its_chapter_and_every_question_kind():
    from viz_transformer.analysis import questions
    for path, lang in ((ROOT / "docs" / "lessons.md", "en"), (ROOT / "docs" / "zh-CN" / "lessons.md", "zh")):
        text = path.read_text(encoding="utf-8")
        for row in shelf.shelf():
            line = next((x for x in text.splitlines() if f"`{row.name}`" in x and x.startswith("|")), "")
            assert row.chapter[lang] in line and f"| {row.steps} | {row.questions} |" in line, (path.name, row.name)
        for kind in questions.KINDS:
            assert f"| `{kind}` |" in text, (path.name, kind)
