""""Present this class": the teacher's page of a live class in presenter mode (`/live_class?teach=CODE&present=1`),
one screen for the projector: the lesson's current step (its note, a link to its figure page), ← / → moving the
whole class, "Reveal the answer", the live answers chart, and the class code with its QR code.

Nothing here is kept in the page: the step and the reveal are in the class store (viz_explorer/classroom/store.py), the
teacher's right in the session and its cookie (class_control), presenter mode in the address; a reload keeps it all.
"""
from __future__ import annotations

import streamlit as st

from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.classroom import class_control, class_questions, live_class, qr
from viz_explorer.lessons import lesson_file, lesson_mode
from viz_explorer.kit import presenter
from viz_explorer.kit.strings import current, t

# The chart's share of a 1920x1080 screen, under the step's box: about half its height (the chart stretches to its
# column's width, so only the height limits its zoom)
CHART_PX = (presenter.AREA_PX[0], 0.55 * presenter.AREA_PX[1])


def _move(code: str, secret: str, step: int) -> None:
    try:
        cr.set_step(code, secret, step)
    except cr.ClassError as e:
        st.session_state["_cp_error"] = live_class.say(e)


def step_note(lesson: lesson_file.Lesson, name: str, i: int) -> str:
    """Step i's note in the interface's language, its facts filled in from the model ("" when they cannot be:
    a note with numbers missing is not shown)."""
    text = lesson_file.note(lesson.steps[i].note, current())
    try:
        values, _ = lesson_mode.step_facts(name, lesson, i)
    except ValueError:
        return "" if lesson_file.PLACEHOLDER.search(text) else text
    return lesson_file.fill(text, values)


def show(code: str, secret: str, name: str, step: int) -> None:
    """The view (live_class.show's teacher_view while presenter mode is on)."""
    try:
        lesson = lesson_mode.load(name)
    except ValueError as e:
        st.error(t("ls.bad", error=str(e)))
        return
    n = len(lesson.steps)
    step = min(step, n - 1)
    if (error := st.session_state.pop("_cp_error", None)) is not None:
        st.error(error)
    left, right = st.columns([3, 2], gap="large")
    with left.container(border=True, key="cp_step"):
        st.markdown(f"**{t('lc.teacher_title', code=code, lesson=lesson_file.note(lesson.title, current()))}**")
        st.progress((step + 1) / n)
        st.caption(t("lc.step_n", i=step + 1, n=n))
        if note := step_note(lesson, name, step):
            st.markdown(note)
        presenter.step_buttons(st, (t("lc.back"), _move, (code, secret, step - 1), step <= 0),
                               (t("lc.next"), _move, (code, secret, step + 1), step + 1 >= n))
        row = st.container(horizontal=True, vertical_alignment="center")
        row.link_button(t("pc.open_figure"),                  # the lesson tab follows and moves the class too
                        live_class.own_link("/", lesson=name, step=step + 1, lang=current(), present=1,
                                         **{live_class.TEACH: code}), icon=":material/open_in_new:")
        focus = cv.focus(code)
        q = class_questions.class_question(name, step, focus)
        live_class.reveal_button(code, secret, q, where=row)
    with left:
        live_class.live_chart(code, secret, q, step, n, area=CHART_PX, focus=focus)
    with right:
        qr.class_card(code, live_class.join_link(code))
        class_control.show_key(secret)
    class_control.keep_in_browser(code, secret)
