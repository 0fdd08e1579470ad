"""Lesson mode: `?lesson=NAME` puts lessons/NAME.json on top of the pages (note, Back/Next, "back to the
lesson", the step's question), and a teacher's "save as lesson step" builds a lesson file to download.

A step's settings (viz_explorer.lessons.lesson_file.SETTINGS) become session-state keys through
viz_explorer/lessons/view_state.py, the one table of which widget key each page uses (links use it too); the same
table reads the current state back for saving.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import callbacks, presenter, sidebar, widgets
from viz_explorer.lessons import lesson_file, quiz
from viz_explorer.lessons.view_state import current_settings, session_values
from viz_explorer.kit.strings import current, in_language, t
from viz_transformer.analysis import claims, questions


def folder() -> Path:
    return Path(os.environ.get("VIZ_LESSONS") or lesson_file.LESSONS_DIR)


@cached.heavy
def _load(name: str, stamp: float) -> lesson_file.Lesson:
    return lesson_file.load_lesson(name, folder())


def load(name: str) -> lesson_file.Lesson:
    path = lesson_file.lesson_path(name, folder())
    return _load(name, path.stat().st_mtime if path.is_file() else 0.0)


class MissingModel(ValueError):
    """The checkpoint a lesson step is written for is not on this server."""

    def __init__(self, ckpt: str):
        super().__init__(f"checkpoint {ckpt!r} is not in {cached.checkpoints_root()}")
        self.ckpt = ckpt


def _lesson_model(lesson: lesson_file.Lesson, i: int) -> tuple[Path, str]:
    """(the folder of the checkpoint step i is written for, the text in force there); MissingModel when this
    server lacks it, ValueError when the lesson names neither and the session has none."""
    ckpt, text = lesson_file.model_and_text(lesson, i)
    ckpt, text = ckpt or st.session_state.get("ckpt"), text or st.session_state.get("text")
    if not ckpt or not text:
        raise ValueError("this lesson step names no checkpoint and text, and none is open")
    path = cached.checkpoints_root() / str(ckpt)
    if not path.is_dir():
        raise MissingModel(str(ckpt))
    return path, text


class _Model:
    """A loaded checkpoint whose run(text) is the app's cached run, so the facts share the pages' runs."""

    def __init__(self, path: str, stamp: float):
        self._hm, self._key = cached.load_model(path, stamp), (path, stamp)

    def run(self, text: str):
        return cached.run_text(*self._key, text)

    def __getattr__(self, name):
        return getattr(self._hm, name)


@cached.heavy
def _facts(name: str, stamp: float, i: int, path: str, ckpt_stamp: float, text: str) -> tuple[dict, list[str]]:
    """(fact name -> field -> value, the claims that do not hold) of step i, on the lesson's checkpoint
    and text at that step: computed from the model once per lesson step and checkpoint."""
    step = _load(name, stamp).steps[i]
    hm, values, broken = _Model(path, ckpt_stamp), {}, []
    for key, spec in step.facts.items():
        fact = claims.evaluate(spec["kind"], hm, text, {k: v for k, v in spec.items() if k != "kind"})
        values[key] = fact.values
        if not fact.holds:
            broken.append(fact.claim)
    return values, broken


def step_facts(name: str, lesson: lesson_file.Lesson, i: int) -> tuple[dict, list[str]]:
    """The evaluated facts of step i ({} when it has none). ValueError when they cannot be computed."""
    if not lesson.steps[i].facts:
        return {}, []
    path, text = _lesson_model(lesson, i)
    stamp = lesson_file.lesson_path(name, folder()).stat().st_mtime
    with st.spinner(t("ls.facts")):
        return _facts(name, stamp, i, str(path), cached.folder_stamp(path), text)


def _question(path: str, ckpt_stamp: float, text: str, kind: str, args: dict) -> questions.Question:
    """A question's options, answer and evidence on a checkpoint and text: computed once per arguments, in the memo
    (keyed by the arguments' repr: the facts' values may be lists, which no hash takes)."""
    key = (f"{__name__}._question", (path, ckpt_stamp, text, kind, repr(sorted(args.items()))), ())
    return cached.memo().get(key, lambda: questions.ask(kind, _Model(path, ckpt_stamp), text, args))


def step_question(name: str, i: int) -> Optional[tuple[questions.Question, dict]]:
    """(the question of step i of lesson `name`, its prompt by language), None when the step has none;
    ValueError when it cannot be computed (its checkpoint is missing, a fact fails)."""
    lesson = load(name)
    if not 0 <= i < len(lesson.steps) or not lesson.steps[i].question:
        return None
    step = lesson.steps[i]
    values, _ = step_facts(name, lesson, i)
    args = lesson_file.question_args(step, values)
    path, text = _lesson_model(lesson, i)
    with st.spinner(t("qz.computing")):
        q = _question(str(path), cached.folder_stamp(path), text, step.question["kind"], args)
    return q, step.question["prompt"]


def question(page, pages: dict) -> None:
    """The lesson step's question above the page (viz_explorer.lessons.quiz), when the step has one and its page is
    open. A question that cannot be computed shows a one-line warning instead."""
    state = st.session_state.get("lesson")
    if not isinstance(state, dict):
        return
    try:
        lesson = load(state["name"])
    except ValueError:
        return                                                  # before_sidebar said so already
    i = min(state["step"], len(lesson.steps) - 1)
    step = lesson.steps[i]
    if not step.question or page.title != pages[step.page].title:
        return
    try:
        q, prompt = step_question(state["name"], i)
    except MissingModel:
        return                                                  # the lesson panel says which model is missing
    except ValueError as e:
        st.warning(t("qz.bad", error=widgets.md_escape(str(e))))
        return
    quiz.show(quiz.question_id(state["name"], i), q, lesson_file.note(prompt, current()))


def _go(i: int) -> None:
    st.session_state["lesson"]["step"] = i
    st.session_state["lesson_pending"] = True


def open_lesson(name: str) -> None:
    """Open lesson `name` at its first step on the next run (a button's callback: the lesson shelf's Open)."""
    st.session_state["lesson"] = {"name": name, "step": 0}
    st.session_state["lesson_pending"] = True


def _leave() -> None:
    st.session_state.pop("lesson", None)
    st.query_params.clear()


def before_sidebar(page, pages: dict) -> None:
    """Open ?lesson=NAME, apply a pending step (switching to its page), and show the lesson panel at
    the top of the page. pages: lesson page name -> st.Page."""
    name = st.query_params.get("lesson")
    state = st.session_state.get("lesson")
    if name and (state is None or state["name"] != name):
        try:
            lesson = load(name)
        except ValueError as e:
            st.error(t("ls.bad", error=str(e)))
            return
        step = st.query_params.get("step", "1")
        step = int(step) - 1 if step.isdigit() and 1 <= int(step) <= len(lesson.steps) else 0
        st.session_state["lesson"] = state = {"name": name, "step": step}
        st.session_state["lesson_pending"] = True
    if state is None:
        return
    try:
        lesson = load(state["name"])
    except ValueError as e:                                     # the file went away or broke meanwhile
        st.session_state.pop("lesson", None)
        st.error(t("ls.bad", error=str(e)))
        return
    i = min(state["step"], len(lesson.steps) - 1)
    step = lesson.steps[i]
    missing = None
    try:
        _lesson_model(lesson, i)
        values, broken = step_facts(state["name"], lesson, i)
        settings = lesson_file.step_settings(step, values)
    except MissingModel as e:                                   # said once, in words: not as a broken claim
        values, broken, settings, missing = None, [], step.settings, e.ckpt
    except ValueError as e:                                     # e.g. a checkpoint whose output lacks the piece
        values, broken, settings = None, [str(e)], step.settings
    # every step re-applies the lesson's checkpoint and text in force: its notes are about them
    ckpt, text = lesson_file.model_and_text(lesson, i)
    settings = {**({"checkpoint": ckpt} if ckpt else {}), **({"text": text} if text else {}), **settings}
    if st.session_state.pop("lesson_pending", False):
        st.session_state.update(session_values(step.page, settings))
        if page.title != pages[step.page].title:
            st.session_state["lesson_pending"] = True          # applied again once the page is open
            st.switch_page(pages[step.page])
    st.query_params.update({"lesson": state["name"], "step": str(i + 1)})
    panel(lesson, i, step, page.title == pages[step.page].title, values, broken, missing,
          ckpt if ckpt and st.session_state.get("ckpt") not in (None, ckpt) else None)


def panel(lesson: lesson_file.Lesson, i: int, step: lesson_file.Step, on_page: bool, values, broken,
          missing: Optional[str] = None, other: Optional[str] = None) -> None:
    """The lesson box at the top of the page (a student on a laptop or a phone sees it without scrolling; the
    sidebar keeps the navigation): title, progress, the step's note in the interface language (markdown, never
    HTML; the facts filled in from the model; the other language's only when the lesson has none in this one),
    then the lesson's own buttons. Collapsible. missing: the lesson's checkpoint when this server lacks it; other:
    the lesson's checkpoint when the session looks at another one (a step written for one model, read on another)."""
    title, counter = lesson_file.note(lesson.title, current()), t("ls.step", i=i + 1, n=len(lesson.steps))
    if presenter.active():
        box = presenter.lesson_box()
        box.markdown(f"**{t('ls.panel', title=title)}**")
    else:
        box = st.container(key="lesson_panel").expander(t("ls.panel", title=title), expanded=True,
                                                        icon=":material/school:")
    box.progress((i + 1) / len(lesson.steps))
    box.caption(counter)
    notes = []
    for lang in sorted(step.note, key=lambda lang: lang != current()):
        text = step.note[lang]
        if values is not None:
            notes.append(lesson_file.fill(text, values))
        elif not lesson_file.PLACEHOLDER.search(text):          # numbers that could not be computed: not shown
            notes.append(text)
    for text in notes[:1]:
        box.markdown(text)
    for claim in broken:
        box.warning(t("ls.broken", claim=claim))
    if missing:
        box.warning(t("ls.no_model", model=missing, have=", ".join(sidebar.checkpoint_names()) or "–"),
                    icon=":material/warning:")
    elif other:
        box.info(t("ls.other_model", model=other, current=st.session_state.get("ckpt")), icon=":material/info:")
    buttons(box, i, len(lesson.steps))
    if not on_page and not presenter.active():
        box.caption(t("ls.elsewhere"))


def buttons(box, i: int, n: int) -> None:
    """Back / Next (and, outside presenter mode, back to the step's view and leave), in one row that wraps."""
    if presenter.active():                                      # ← / → and two buttons in a row
        presenter.step_buttons(box, (t("ls.back"), _go, (i - 1,), i == 0), (t("ls.next"), _go, (i + 1,), i + 1 >= n))
        return
    row = box.container(horizontal=True, key="ls_buttons")
    row.button(t("ls.back"), key="ls_back", on_click=_go, args=(i - 1,), disabled=i == 0,
               icon=":material/chevron_left:")
    row.button(t("ls.next"), key="ls_next", on_click=_go, args=(i + 1,), disabled=i + 1 >= n, type="primary",
               icon=":material/chevron_right:", icon_position="right")
    row.button(t("ls.restore"), key="ls_restore", on_click=_go, args=(i,), icon=":material/restart_alt:")
    row.button(t("ls.leave"), key="ls_leave", on_click=_leave, type="tertiary", icon=":material/logout:")


def _text(key: str) -> str:
    """A text box's value, "" for anything else a stale or scripted session may hold."""
    v = st.session_state.get(key, "")
    return v.strip() if isinstance(v, str) else ""


def _save_step(page: str, kind: str) -> None:
    note = {lang: _text(f"ls_note_{lang}") for lang in lesson_file.LANGS}
    note = {k: v for k, v in note.items() if v} or {"en": ""}
    st.session_state.setdefault("lesson_draft", []).append(
        lesson_file.Step(page, current_settings(page, kind), note, question=_draft_question()).to_dict())


def _draft_question() -> dict:
    """The writer's question for the step being saved ({} for none): a kind and its prompt; the model
    computes the rest from the step's settings when the lesson is opened."""
    kind = st.session_state.get("ls_q_kind")
    if kind not in questions.KINDS:
        return {}
    prompt = {lang: _text(f"ls_q_{lang}") for lang in lesson_file.LANGS}
    prompt = {k: v for k, v in prompt.items() if v} or {current(): t(f"ls.q_kind.{kind}")}
    return {"kind": kind, "prompt": prompt}


def writer(current: str, kind: str) -> None:
    """The teacher's tools at the bottom of the sidebar: save the current page as a step, download."""
    for key in ("ls_title_en", "ls_title_zh", "ls_note_en", "ls_note_zh", "ls_q_en", "ls_q_zh"):
        if key in st.session_state and not isinstance(st.session_state[key], str):
            del st.session_state[key]                       # absurd state: the box starts empty again
    if not isinstance(st.session_state.get("lesson_draft", []), list):
        del st.session_state["lesson_draft"]
    with st.sidebar.expander(t("ls.write"), icon=":material/school:"):
        st.caption(t("ls.write_help"))
        st.text_input(t("ls.title_en"), key="ls_title_en", value=t("ls.default_title"))
        st.text_input(t("ls.title_zh"), key="ls_title_zh")
        st.text_input(t("ls.note_en"), key="ls_note_en")          # one line: markdown allowed
        st.text_input(t("ls.note_zh"), key="ls_note_zh")
        widgets.select(st, t("ls.q_kind"), ["none", *questions.KINDS], key="ls_q_kind",
                       format_func=in_language(callbacks.label("ls.q_kind.")), help=t("ls.q_help"))
        if st.session_state.get("ls_q_kind") in questions.KINDS:
            st.text_input(t("ls.q_prompt_en"), key="ls_q_en")
            st.text_input(t("ls.q_prompt_zh"), key="ls_q_zh")
        st.button(t("ls.save"), key="ls_save", on_click=_save_step, args=(current, kind), icon=":material/add:")
        draft = st.session_state.get("lesson_draft", [])
        st.caption(t("ls.draft", n=len(draft)))
        if draft:
            title = {k: v for k in lesson_file.LANGS if (v := _text(f"ls_title_{k}"))}
            data = lesson_file.Lesson("draft", title or {"en": t("ls.default_title")},
                                  [lesson_file.Step(**s) for s in draft]).dumps()
            st.download_button(t("ls.download"), data, file_name="my-lesson.json", mime="application/json",
                               key="ls_download", icon=":material/download:")
            st.button(t("ls.clear"), key="ls_clear", on_click=lambda: st.session_state.pop("lesson_draft", None))
