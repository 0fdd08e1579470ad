"""What a class learned, from its votes (votes.class_votes rows): per question the share right in the first vote
and in the vote after discussion and who moved; per concept the share right in the check before the lesson and in
the check after it, and Hake's normalised gain g = (post − pre) / (1 − pre) (Hake 1998: class averages); the report
as CSV (one row per student, question and round) and an HTML summary. No streamlit; labels come from the page.

A student is "student N" (N: joining order) or the nickname they gave; nothing else identifies them.
"""
from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Share:
    right: int
    n: int

    @property
    def value(self) -> Optional[float]:
        return self.right / self.n if self.n else None


def hake(pre: Optional[float], post: Optional[float]) -> Optional[float]:
    """(post − pre) / (1 − pre) for shares in [0, 1]; None when either is missing or pre is 1 (no room to gain)."""
    if pre is None or post is None or pre >= 1:
        return None
    return (post - pre) / (1 - pre)


def _latest(votes: list[dict]) -> dict[tuple, str]:
    """(student, question, round) -> choice (the rows hold one per key; the latest wins if not)."""
    out = {}
    for v in sorted(votes, key=lambda v: v["at"]):
        out[v["student"], v["question"], v["round"]] = v["choice"]
    return out


def share(votes: list[dict], question: str, right: str, round: int = 1) -> Share:
    """How many of the students who voted in `round` of `question` chose `right`."""
    picks = [c for (_, q, r), c in _latest(votes).items() if q == question and r == round]
    return Share(sum(c == right for c in picks), len(picks))


@dataclass(frozen=True)
class Moves:
    to_right: int          # wrong in round 1, right in round 2
    to_wrong: int          # right, then wrong
    stayed_right: int
    stayed_wrong: int      # wrong both times (a change between wrong options included)

    @property
    def n(self) -> int:
        return self.to_right + self.to_wrong + self.stayed_right + self.stayed_wrong


def moves(votes: list[dict], question: str, right: str) -> Moves:
    """Among students who voted in both rounds of `question`, how their answer moved."""
    got = _latest(votes)
    both = {s for (s, q, r) in got if q == question and r == 1} & {s for (s, q, r) in got if q == question and r == 2}
    pairs = [(got[s, question, 1] == right, got[s, question, 2] == right) for s in both]
    return Moves(sum(not a and b for a, b in pairs), sum(a and not b for a, b in pairs),
                 sum(a and b for a, b in pairs), sum(not a and not b for a, b in pairs))


@dataclass(frozen=True)
class QuestionRow:
    question: str
    first: Share
    second: Share
    moves: Moves


def question_rows(votes: list[dict], answers: dict[str, Optional[str]]) -> list[QuestionRow]:
    """One row per question the class voted on that has a right answer (answers: question -> right choice, None for
    a poll), in the order first voted on."""
    order = list(dict.fromkeys(v["question"] for v in sorted(votes, key=lambda v: v["at"])))
    return [QuestionRow(q, share(votes, q, answers[q], 1), share(votes, q, answers[q], 2), moves(votes, q, answers[q]))
            for q in order if answers.get(q) is not None]


@dataclass(frozen=True)
class ConceptRow:
    concept: str
    pre: Share             # the check before the lesson (its form-a question, first vote)
    post: Share            # the check after (its form-b question, first vote)

    @property
    def g(self) -> Optional[float]:
        return hake(self.pre.value, self.post.value)


def concept_rows(votes: list[dict], pairs: dict[str, tuple[str, str]], answers: dict[str, str]) -> list[ConceptRow]:
    """Per concept (pairs: concept -> (pre question, post question)) that the class answered at least once."""
    out = []
    for concept, (pre_q, post_q) in pairs.items():
        row = ConceptRow(concept, share(votes, pre_q, answers[pre_q]), share(votes, post_q, answers[post_q]))
        if row.pre.n or row.post.n:
            out.append(row)
    return out


def class_gain(rows: list[ConceptRow]) -> tuple[Share, Share, Optional[float]]:
    """The class's (pre, post, g) over every concept answered both before and after: all their answers pooled."""
    both = [r for r in rows if r.pre.n and r.post.n]
    pre = Share(sum(r.pre.right for r in both), sum(r.pre.n for r in both))
    post = Share(sum(r.post.right for r in both), sum(r.post.n for r in both))
    return pre, post, hake(pre.value, post.value)


def student_name(vote: dict, anonymous=lambda n: f"student {n}") -> str:
    """The nickname the student gave, else anonymous(their number)."""
    return vote["nickname"] or anonymous(vote["student"])


def csv_text(votes: list[dict], answers: dict[str, Optional[str]], anonymous=lambda n: f"student {n}") -> str:
    """One row per student, question and round: student, question, round, choice, right (1, 0, or empty for a
    question with no right answer)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student", "question", "round", "choice", "right"])
    for v in sorted(votes, key=lambda v: (v["student"], v["at"])):
        right = answers.get(v["question"])
        w.writerow([student_name(v, anonymous), v["question"], v["round"], v["choice"],
                    "" if right is None else int(v["choice"] == right)])
    return buf.getvalue()


def _pct(s: Share) -> str:
    return "–" if s.value is None else f"{100 * s.value:.0f}% ({s.right}/{s.n})"


def _g(g: Optional[float]) -> str:
    return "–" if g is None else f"{g:.2f}"


def html_summary(title: str, labels: dict, qrows: list[QuestionRow], crows: list[ConceptRow],
                 names: dict[str, str]) -> str:
    """A self-contained HTML page: the class's gain, the concepts' table, the questions' table. labels: the page's
    words (keys: class, concepts, questions, concept, question, pre, post, g, first, second, to_right, to_wrong,
    lang); names: question or concept id -> what to call it. Every text is escaped."""
    e = html.escape
    pre, post, g = class_gain(crows)
    head = (f"<!doctype html><html lang=\"{e(labels['lang'])}\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #999;padding:.3em .6em;text-align:left}</style></head><body>")
    parts = [head, f"<h1>{e(title)}</h1>",
             f"<p>{e(labels['class'])}: {e(labels['pre'])} {e(_pct(pre))} · {e(labels['post'])} {e(_pct(post))} · "
             f"g = {e(_g(g))}</p>"]
    if crows:
        parts.append(f"<h2>{e(labels['concepts'])}</h2><table><tr><th>{e(labels['concept'])}</th>"
                     f"<th>{e(labels['pre'])}</th><th>{e(labels['post'])}</th><th>g</th></tr>")
        parts += [f"<tr><td>{e(names.get(r.concept, r.concept))}</td><td>{e(_pct(r.pre))}</td><td>{e(_pct(r.post))}</td>"
                  f"<td>{e(_g(r.g))}</td></tr>" for r in crows]
        parts.append("</table>")
    if qrows:
        parts.append(f"<h2>{e(labels['questions'])}</h2><table><tr><th>{e(labels['question'])}</th>"
                     f"<th>{e(labels['first'])}</th><th>{e(labels['second'])}</th><th>{e(labels['to_right'])}</th>"
                     f"<th>{e(labels['to_wrong'])}</th></tr>")
        parts += [f"<tr><td>{e(names.get(r.question, r.question))}</td><td>{e(_pct(r.first))}</td>"
                  f"<td>{e(_pct(r.second))}</td><td>{r.moves.to_right}</td><td>{r.moves.to_wrong}</td></tr>"
                  for r in qrows]
        parts.append("</table>")
    return "".join(parts) + "</body></html>"
