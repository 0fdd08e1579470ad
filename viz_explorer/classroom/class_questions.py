"""The question a live class is on: a bank question the teacher put it on (a concept check), else its lesson step's
question from QUESTION_SOURCES (the first that gives one): the step's own question (viz_explorer/lessons/quiz.py;
options computed by the model), else the check-in poll ("Got it / Not sure / Lost").
"""
from __future__ import annotations

from typing import Callable, Optional

import streamlit as st

from viz_explorer.classroom import bank, checks_view
from viz_explorer.classroom.question import Question
from viz_explorer.lessons import lesson_file, lesson_mode, quiz
from viz_explorer.kit.strings import current, t


def check_in(lesson: str, step: int) -> Question:
    """The question every step has: how well the class follows."""
    opts = ("got_it", "unsure", "lost")
    return Question(f"{lesson}#{step + 1}:check-in", t("lc.check_in"), opts, tuple(t(f"lc.opt.{o}") for o in opts))


def lesson_question(lesson: str, step: int) -> Optional[Question]:
    """The lesson step's own question (viz_explorer.lessons.quiz: options computed by the model), with the same id the
    lesson tab's quiz reports to on_answer; None when the step has none or it cannot be computed here."""
    try:
        got = lesson_mode.step_question(lesson, step)
    except ValueError:
        return None
    if got is None:
        return None
    q, prompt = got
    return Question(quiz.question_id(lesson, step), lesson_file.note(prompt, current()), tuple(q.options),
                    tuple(quiz.option_label(o) for o in q.options), q.options[q.answer])


QUESTION_SOURCES: list[Callable[[str, int], Optional[Question]]] = [lesson_question, check_in]


def question(lesson: str, step: int) -> Question:
    return next(q for src in QUESTION_SOURCES if (q := src(lesson, step)) is not None)


def class_question(lesson: str, step: int, focus: Optional[str]) -> Question:
    """The question the class is on: the bank question the teacher put it on (votes.focus), else its lesson step's
    (a bank that cannot be read now is said in one line and the step's question asked)."""
    if focus is not None:
        try:
            q = checks_view.as_question(focus)
        except ValueError as e:
            st.warning(t("ck.broken", error=str(e)), icon=":material/warning:")
            q = None
        if q is not None:
            return q
    return question(lesson, step)


def lesson_answer(question_id: str) -> Optional[str]:
    """The right option of a lesson step's question from its id (quiz.question_id), None for a poll or an id that
    is not one."""
    name, _, i = question_id.rpartition("/")
    if not i.isdigit() or name.startswith(bank.PREFIX + "/"):
        return None
    q = lesson_question(name, int(i) - 1)
    return None if q is None else q.answer
