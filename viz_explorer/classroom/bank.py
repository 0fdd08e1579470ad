"""Question banks: multiple-choice questions a teacher asks a class, one JSON file per bank in questions/ (beside
lessons/; VIZ_QUESTIONS names another folder). No streamlit.

    {"title": {"en": "...", "zh": "..."}, "checkpoint": "zh-en-postnorm", "text": "我是一名工程师。",
     "questions": [{"id": "scaling-b", "concept": "scaling", "form": "b", "page": "step_by_step",
                    "figure": {"en": "the Scores tab", "zh": "…"},
                    "prompt": {"en": "In {model}, d_k = {hs.d_head}. …", "zh": "…"},
                    "options": [{"en": "…", "zh": "…"}, …], "answer": 2,
                    "facts": {"hs": {"kind": "head_size"}}}]}

A concept check is a pair of questions on one concept with different surfaces ("form" a and b): one half is the
class's check before a lesson, the other the check after it, so the share right before and after measures what the
lesson taught (gain.py). A question may leave "form" out: it takes part in votes and in the per-question report only.
"page" and "figure" say where in the app the answer can be seen. Numbers the model computes are not typed: a question
names facts (kinds of viz_transformer.analysis.claims, evaluated on the bank's checkpoint and text) and its prompt
and options print them ({hs.d_head}; {model} is the checkpoint's name). `load_bank` checks a file and raises
ValueError naming the question and the field: a missing translation, an answer that is not among the options.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from viz_explorer.lessons import lesson_file

QUESTIONS_DIR = Path(__file__).resolve().parents[2] / "questions"
LANGS = lesson_file.LANGS
ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
OPTIONS = "ABCDEF"                 # what the class store keeps: a choice's letter, the same in every language
MAX_QUESTIONS = 200
MAX_BYTES = 500_000
PREFIX = "check"                   # a bank question's id in a class: check/BANK/ID


@dataclass(frozen=True)
class Check:
    id: str
    concept: str
    form: str                      # "a" or "b": the two halves of a concept check; "" for a question alone
    page: str                      # where the app shows the answer (a page's name in the navigation)
    figure: dict                   # language -> which figure on that page
    prompt: dict                   # language -> markdown, with {fact.field} and {model} placeholders
    options: tuple                 # of {language: text}
    answer: int                    # the right option's index
    facts: dict                    # fact name -> {"kind": …, arguments}

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(OPTIONS[:len(self.options)])


@dataclass(frozen=True)
class Bank:
    name: str
    title: dict
    checkpoint: str
    text: str
    questions: tuple[Check, ...]

    def class_id(self, check: Check) -> str:
        """The question's id in a class's store."""
        return f"{PREFIX}/{self.name}/{check.id}"

    def half(self, form: str) -> list[Check]:
        """The questions of one half of the concept checks ("a" or "b"), in file order."""
        return [q for q in self.questions if q.form == form]


def folder() -> Path:
    return Path(os.environ.get("VIZ_QUESTIONS") or QUESTIONS_DIR)


def list_banks(where: Optional[Path] = None) -> list[str]:
    where = where or folder()
    return sorted(p.stem for p in where.glob("*.json") if ID.match(p.stem)) if where.is_dir() else []


def _texts(value, where: str, langs: tuple[str, ...]) -> dict:
    """Text in every language of `langs` (the bank's title decides them); a missing one is named."""
    if not isinstance(value, dict) or any(k not in LANGS or not isinstance(v, str) or not v.strip()
                                          for k, v in value.items()):
        raise ValueError(f"{where} must be text by language ({', '.join(LANGS)}), e.g. {{\"en\": \"…\", \"zh\": \"…\"}}")
    missing = [lang for lang in langs if lang not in value]
    if missing:
        raise ValueError(f"{where} has no {', '.join(missing)} text (the bank is written in {', '.join(langs)})")
    return dict(value)


def _question(q, i: int, langs: tuple[str, ...]) -> Check:
    where = f"question {i + 1}"
    if not isinstance(q, dict):
        raise ValueError(f"{where} must be an object")
    qid = q.get("id")
    if not isinstance(qid, str) or not ID.match(qid):
        raise ValueError(f"{where}: id must be 1 … 48 of a-z, 0-9, - and _")
    where = f"question {qid!r}"
    concept, form = q.get("concept", qid), q.get("form", "")
    if not isinstance(concept, str) or not ID.match(concept) or form not in ("", "a", "b"):
        raise ValueError(f"{where}: concept must be a name like its id, form \"a\", \"b\" or left out")
    page = q.get("page")
    if page not in lesson_file.PAGES:
        raise ValueError(f"{where}: page {page!r} is not a page; pages: {', '.join(lesson_file.PAGES)}")
    opts = q.get("options")
    if not isinstance(opts, list) or not 2 <= len(opts) <= len(OPTIONS):
        raise ValueError(f"{where}: options must be a list of 2 … {len(OPTIONS)}")
    options = tuple(_texts(o, f"{where}: option {OPTIONS[j]}", langs) for j, o in enumerate(opts))
    for lang in langs:
        if len({o[lang] for o in options}) != len(options):
            raise ValueError(f"{where}: two options read the same in {lang}")
    answer = q.get("answer")
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(options):
        raise ValueError(f"{where}: answer {answer!r} is not among its options (0 … {len(options) - 1}: the index of "
                         "the right one)")
    prompt = _texts(q.get("prompt"), f"{where}: prompt", langs)
    facts, _ = lesson_file.check_facts(q.get("facts", {}), {}, {}, where)
    for text in [*prompt.values(), *(v for o in options for v in o.values())]:
        for m in lesson_file.PLACEHOLDER.finditer(text):
            if m.group(1) not in facts:
                raise ValueError(f"{where} prints {{{m.group(1)}.{m.group(2)}}}, but names no fact {m.group(1)!r}")
    unknown = set(q) - {"id", "concept", "form", "page", "figure", "prompt", "options", "answer", "facts"}
    if unknown:
        raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
    return Check(qid, concept, form, page, _texts(q.get("figure"), f"{where}: figure", langs), prompt, options,
                 answer, facts)


def parse_bank(data, name: str = "bank") -> Bank:
    """A bank from its JSON object, checked (ValueError naming the question and field)."""
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise ValueError(f"{name}: a bank is an object with a list of questions")
    title = data.get("title")
    if not isinstance(title, dict) or not title:
        raise ValueError(f"{name}: title must be text by language, e.g. {{\"en\": \"…\", \"zh\": \"…\"}}")
    langs = tuple(lang for lang in LANGS if lang in title)
    title = _texts(title, f"{name}: title", langs)
    ckpt, text = data.get("checkpoint", ""), data.get("text", "")
    if not isinstance(ckpt, str) or not isinstance(text, str) or len(text) > 2000:
        raise ValueError(f"{name}: checkpoint and text must be text")
    qs = data["questions"]
    if not 0 < len(qs) <= MAX_QUESTIONS:
        raise ValueError(f"{name}: a bank holds 1 … {MAX_QUESTIONS} questions")
    checks = tuple(_question(q, i, langs) for i, q in enumerate(qs))
    seen: dict[tuple[str, str], str] = {}
    for c in checks:
        if c.id in {x.id for x in checks if x is not c}:
            raise ValueError(f"{name}: two questions have the id {c.id!r}")
        if c.form:
            if (c.concept, c.form) in seen:
                raise ValueError(f"{name}: concept {c.concept!r} has two form-{c.form} questions "
                                 f"({seen[c.concept, c.form]!r} and {c.id!r})")
            seen[c.concept, c.form] = c.id
    for concept, form in seen:
        other = "b" if form == "a" else "a"
        if (concept, other) not in seen:
            raise ValueError(f"{name}: concept {concept!r} has a form-{form} question but no form-{other} one "
                             "(a concept check is a pair)")
    if any(c.facts for c in checks) and not ckpt:
        raise ValueError(f"{name}: questions name facts, so the bank needs a checkpoint (and a text) to compute them on")
    return Bank(name, title, ckpt, text, checks)


def load_bank(name: str, where: Optional[Path] = None) -> Bank:
    if not isinstance(name, str) or not ID.match(name):
        raise ValueError(f"{name!r} is not a bank name (a-z, 0-9, - and _)")
    path = (where or folder()) / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"there is no question bank {name!r} in {path.parent}")
    return parse_bank(lesson_file.read_json(path, MAX_BYTES), name)


def needs_facts(bank: Bank) -> dict:
    """Every fact the bank's questions print, by name (one evaluation each on the bank's checkpoint and text)."""
    out: dict = {}
    for q in bank.questions:
        for key, spec in q.facts.items():
            if key in out and out[key] != spec:
                raise ValueError(f"{bank.name}: fact {key!r} means two things in two questions")
            out[key] = spec
    return out


def filled(bank: Bank, q: Check, values: dict, lang: str) -> tuple[str, tuple[str, ...]]:
    """(prompt, option labels) in `lang` (else the first language there is), with the facts' values and the model's
    name printed in them."""
    model = lesson_file.MARKDOWN.sub(r"\\\1", bank.checkpoint)

    def fill(text: str) -> str:
        return lesson_file.fill(text.replace("{model}", model), values)
    return fill(lesson_file.note(q.prompt, lang)), tuple(fill(lesson_file.note(o, lang)) for o in q.options)


def find(question_id: str, load=None) -> Optional[tuple[Bank, Check]]:
    """The bank and question of a class's question id (check/BANK/ID); None for any other id or a bank no longer
    there. load(name) -> Bank reads the bank (default load_bank; the page passes its cached reader)."""
    parts = split_id(question_id)
    if parts is None:
        return None
    try:
        bank = (load or load_bank)(parts[0])
    except ValueError:
        return None
    return next(((bank, q) for q in bank.questions if q.id == parts[1]), None)


def split_id(question_id: str) -> Optional[tuple[str, str]]:
    """(bank, question) of a class's question id (check/BANK/ID), None for any other id."""
    parts = question_id.split("/") if isinstance(question_id, str) else []
    if len(parts) != 3 or parts[0] != PREFIX or not ID.match(parts[1]):
        return None
    return parts[1], parts[2]


def to_json(bank: Bank) -> str:
    """The bank as its file holds it (what the teacher's writer downloads)."""
    def one(q: Check) -> dict:
        d = {"id": q.id, "concept": q.concept, "form": q.form, "page": q.page, "figure": q.figure,
             "prompt": q.prompt, "options": list(q.options), "answer": q.answer}
        if not q.form:
            del d["form"]
        if q.facts:
            d["facts"] = q.facts
        return d
    return json.dumps({"title": bank.title, "checkpoint": bank.checkpoint, "text": bank.text,
                       "questions": [one(q) for q in bank.questions]}, ensure_ascii=False, indent=1)
