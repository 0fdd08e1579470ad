"""The lesson shelf's rows: every lesson file with what a teacher chooses by (its title, the tutorial chapter it
follows, its length, its questions, its languages, its model), read from the files themselves. No streamlit."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from viz_explorer.lessons import lesson_file


@dataclass
class Shelved:
    name: str                            # the file's stem: ?lesson=NAME
    title: dict                          # language -> text
    chapter: dict                        # language -> the tutorial section ({} when the file names none)
    steps: int
    questions: int                       # steps that ask one
    languages: tuple[str, ...]           # languages the title and every note are written in
    checkpoint: Optional[str]            # the model its first step opens
    error: Optional[str] = None          # a file that cannot be read: why, in one line (the rest is empty)


def languages(lesson: lesson_file.Lesson) -> tuple[str, ...]:
    """The languages a lesson is whole in: its title and every step's note (a question's prompt too)."""
    texts = [lesson.title] + [s.note for s in lesson.steps] + [s.question["prompt"] for s in lesson.steps if s.question]
    return tuple(lang for lang in lesson_file.LANGS if all(t.get(lang) for t in texts))


def shelf(folder: Optional[Path] = None) -> list[Shelved]:
    """Every lesson in `folder` (lessons/ by default), in file-name order; a broken file is a row with its error."""
    out = []
    for name in lesson_file.list_lessons(folder):
        try:
            lesson = lesson_file.load_lesson(name, folder)
        except ValueError as e:
            out.append(Shelved(name, {}, {}, 0, 0, (), None, str(e).splitlines()[0]))
            continue
        out.append(Shelved(name, lesson.title, lesson.chapter, len(lesson.steps),
                           sum(1 for s in lesson.steps if s.question), languages(lesson),
                           lesson_file.model_and_text(lesson, 0)[0]))
    return out
