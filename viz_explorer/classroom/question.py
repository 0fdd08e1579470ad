"""What every class page shows of a question: its id in the store, prompt, options and their labels, the answer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Question:
    id: str                           # the same for every student of every class on this lesson step or bank question
    prompt: str                       # markdown from the lesson, the bank or the strings, never user text
    options: tuple[str, ...]          # what is stored
    labels: tuple[str, ...]           # what is shown, one per option
    answer: Optional[str] = None      # the right option, shown when the teacher reveals it; None for a poll
    letters: tuple[str, ...] = ()     # a bank question's option letters (its chart's x labels); () elsewhere
    where: str = ""                   # markdown: the page and figure that show the answer (a bank question)
