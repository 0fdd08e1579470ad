"""Lessons: a guided path through the app, one JSON file in lessons/ per lesson.

    {"title": {"en": "...", "zh": "..."}, "chapter": {"en": "...", "zh": "..."},
     "steps": [{"page": "attention", "settings": {"checkpoint": "zh-en", "text": "我是一名工程师。",
                "block": "encoder.self_attn", "layer": 0, "head": 3}, "note": {"en": "...", "zh": "..."}}]}

A step names a page and its settings in the app's own words (SETTINGS); the app maps them onto its
widgets. `load_lesson` checks a file and raises ValueError naming the step and the field. "chapter" (optional)
names the tutorial section the lesson follows, by its title, so a teacher can pair them (the lesson shelf shows it).

What a note claims about the model is computed, not typed: a step may carry facts (a kind from
viz_transformer.analysis.claims with its arguments, evaluated on the lesson's checkpoint and text at that step),
fill a setting from one ("use": the head a selector found), and print one in its note:

    {"page": "attention", "settings": {"block": "decoder.cross_attn"},
     "facts": {"align": {"kind": "cross_alignment", "predicts": "▁engineer", "source": "工程师"}},
     "use": {"layer": "align.layer", "head": "align.head"},
     "note": {"en": "Row {align.input} puts {align.weight:.2f} on 工程师."}}

tests/test_lesson_claims.py evaluates every fact of the shipped lessons and fails when a claim is false.

A step may ask one question ("predict, then reveal"): a kind from viz_transformer.analysis.questions, its
arguments (block, layer, head, row default to the step's settings; "use" fills one from a fact) and the prompt.
The model computes the options and the answer; none is typed here:

    "question": {"kind": "argmax_key", "use": {"row": "al.row"},
                 "prompt": {"en": "Which key gets the most weight?", "zh": "哪个键得到的权重最大？"}}
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from viz_explorer.kit import registry
from viz_transformer.analysis import questions
from viz_transformer.analysis.claims import KINDS
from viz_transformer.analysis.summaries import STATS
from viz_transformer.core.encoding import MAX_CHARS

LESSONS_DIR = Path(__file__).resolve().parents[2] / "lessons"
PAGES = tuple(p.name for p in registry.PAGES)       # a step's page: its name in the navigation
LANGS = ("en", "zh")
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")      # a lesson's file name (without .json): safe in a URL
MAX_BYTES = 200_000

# the tabs of the pages that have them (registry.TABBED)
TABS = tuple(dict.fromkeys(tab for _, tabs in registry.TABBED.values() for tab in tabs))
# setting -> (type, check, what it is): the settings a step may carry
SETTINGS: dict[str, tuple[type, Any, str]] = {
    "checkpoint": (str, None, "a checkpoint folder name, e.g. zh-en"),
    "text": (str, lambda v: 0 < len(v) <= MAX_CHARS, f"the sidebar text (1 … {MAX_CHARS:,} characters)"),
    "block": (str, lambda v: v in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
              "encoder.self_attn, decoder.self_attn or decoder.cross_attn"),
    "layer": (int, lambda v: 0 <= v < 64, "a layer (0 … 63)"),
    "head": (int, lambda v: 0 <= v < 64, "a head (0 … 63)"),
    "row": (int, lambda v: 0 <= v < 4096, "a query row of the step-by-step or why-this-attention page"),
    "key": (int, lambda v: 0 <= v < 4096, "a key column of the why-this-attention page"),
    "words": (bool, None, "word-level attention (true/false)"),
    "strategy": (str, lambda v: v in ("greedy", "sample", "beam"), "greedy, sample or beam"),
    "max_new_tokens": (int, lambda v: 1 <= v <= 60, "1 … 60"),
    "beam_width": (int, lambda v: 1 <= v <= 8, "1 … 8"),
    "ablate": (list, lambda v: all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
                                   and isinstance(x[1], int) for x in v),
               'knocked-out heads, e.g. [["decoder.1.cross_attn", 3]]'),
    "ablate_mode": (str, lambda v: v in ("zero", "uniform", "mean"), "zero, uniform or mean"),
    "permutation": (str, lambda v: v in ("reverse", "swap"), "reverse or swap"),
    "other_text": (str, lambda v: 0 < len(v) <= MAX_CHARS, "the second text (compare, patching)"),
    "over": (str, lambda v: v in ("heads", "blocks", "resid"), "heads, blocks or resid"),
    "prefix_len": (int, lambda v: 1 <= v < 4096, "the prefix length shown on the masks page"),
    "lens_step": (int, lambda v: 0 <= v < 4096, "the decoding step the lens marks"),
    "tab": (str, lambda v: v in TABS, "the open tab: " + ", ".join(TABS)),
    "no_sink": (bool, None, "the attention heatmap without the position-0 sink (true/false)"),
    "decode_step": (int, lambda v: 0 <= v <= 4096, "the decoding step shown (0 = [begin])"),
    "temperature": ((int, float), lambda v: 0.1 <= v <= 2.0, "the sampling temperature (0.1 … 2)"),
    "top_k": (int, lambda v: 0 <= v < 2**31, "top-k of sampling (0 = off)"),
    "top_p": ((int, float), lambda v: 0.05 <= v <= 1.0, "top-p of sampling (0.05 … 1)"),
    "seed": (int, lambda v: 0 <= v < 2**31, "the sampling seed"),
    "divisor": ((int, float), lambda v: 0.1 <= v <= 64, "the step-by-step page's divisor of the scores"),
    "positions": (int, lambda v: 1 <= v <= 65536, "the positions the positional-encoding page shows"),
    "depth": (str, lambda v: v in ("first", "last"), "first or last (the architectures page's layer)"),
    "source": (str, lambda v: v in ("text", "builtin"), "text or builtin (the head statistics' sentences)"),
    "stat": (str, lambda v: v in STATS, "a head statistic: " + ", ".join(STATS)),
    "threshold": ((int, float), lambda v: 0.2 <= v <= 0.9, "the head roles' threshold (0.2 … 0.9)"),
    "snapshot": (int, lambda v: 0 <= v < 4096, "the training snapshot shown (its index)"),
    "sentence": (int, lambda v: 0 <= v < 4096, "the training page's sentence (its index)"),
}


FACT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# {fact.field} or {fact.field:format spec} in a note
PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)(?::([^{}]{1,16}))?\}")
MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")    # escaped in filled-in values (a piece may be "*")


@dataclass
class Step:
    page: str
    settings: dict = field(default_factory=dict)
    note: dict = field(default_factory=dict)          # language -> text (markdown, with {fact.field})
    facts: dict = field(default_factory=dict)         # name -> {"kind": claims kind, **arguments}
    use: dict = field(default_factory=dict)           # setting -> "fact.field"
    question: dict = field(default_factory=dict)      # {"kind", arguments, "use", "prompt"} or {} (none)

    def to_dict(self) -> dict:
        out = {"page": self.page, "settings": dict(self.settings), "note": dict(self.note)}
        if self.facts:
            out["facts"] = {k: dict(v) for k, v in self.facts.items()}
        if self.use:
            out["use"] = dict(self.use)
        if self.question:
            out["question"] = {k: dict(v) if isinstance(v, dict) else v for k, v in self.question.items()}
        return out


@dataclass
class Lesson:
    name: str
    title: dict                                       # language -> text
    steps: list[Step]
    chapter: dict = field(default_factory=dict)       # language -> the tutorial section it follows ({}: none named)

    def to_dict(self) -> dict:
        out = {"title": dict(self.title), "steps": [s.to_dict() for s in self.steps]}
        if self.chapter:
            out["chapter"] = dict(self.chapter)
        return out

    def dumps(self) -> str:
        """The lesson file's text (what `load_lesson` reads back)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2) + "\n"


def _texts(value, where: str) -> dict:
    if isinstance(value, str):
        value = {"en": value}
    if not isinstance(value, dict) or not value or any(k not in LANGS or not isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{where} must be text in {' and/or '.join(LANGS)}, e.g. {{\"en\": \"…\", \"zh\": \"…\"}}")
    return dict(value)


def check_settings(settings, where: str) -> dict:
    if not isinstance(settings, dict):
        raise ValueError(f"{where}: settings must be an object")
    for key, value in settings.items():
        if key not in SETTINGS:
            raise ValueError(f"{where}: unknown setting {key!r}; known: {', '.join(SETTINGS)}")
        typ, ok, what = SETTINGS[key]
        good = isinstance(value, bool) if typ is bool else isinstance(value, typ) and not isinstance(value, bool)
        if not good or (ok is not None and not ok(value)):
            raise ValueError(f"{where}: setting {key!r} is {value!r}; it must be {what}")
    return dict(settings)


def check_facts(facts, use, note: dict, where: str) -> tuple[dict, dict]:
    """A step's facts and uses, checked: known kinds, scalar arguments, uses and note placeholders that
    name a fact of this step."""
    if not isinstance(facts, dict) or not isinstance(use, dict):
        raise ValueError(f"{where}: facts and use must be objects")
    for name, spec in facts.items():
        if not FACT_NAME.match(name) or not isinstance(spec, dict) or spec.get("kind") not in KINDS:
            raise ValueError(f"{where}: fact {name!r} must be a name (a-z, 0-9, _) with a kind, one of "
                             f"{', '.join(KINDS)}")
        if not all(isinstance(v, (str, int, float, bool)) for v in spec.values()):
            raise ValueError(f"{where}: fact {name!r}: arguments must be text or numbers")
    for key, ref in use.items():
        if key not in SETTINGS or not isinstance(ref, str) or ref.split(".")[0] not in facts or ref.count(".") != 1:
            raise ValueError(f"{where}: use {key!r}: {ref!r} must name a setting and a fact of this step (fact.field)")
    for text in note.values():
        for m in PLACEHOLDER.finditer(text):
            if m.group(1) not in facts:
                raise ValueError(f"{where}: the note names {{{m.group(1)}.{m.group(2)}}}, but the step has no fact "
                                 f"{m.group(1)!r}")
    return dict(facts), dict(use)


# a question's arguments: those that are also settings are checked as settings, the others here
QUESTION_ARGS: dict[str, tuple[type, Any, str]] = {
    "step": (int, lambda v: 1 <= v <= 4096, "a decoding step (1 … 4096)"),
    "mode": (str, lambda v: v in ("zero", "uniform", "mean"), "zero, uniform or mean"),
}


def check_question(question, facts: dict, where: str) -> dict:
    """A step's question, checked: a known kind, arguments that kind takes (valid values), uses that name a
    fact of this step, a prompt. {} for no question."""
    if question is None or question == {}:
        return {}
    where = f"{where}: question"
    if not isinstance(question, dict) or question.get("kind") not in questions.KINDS:
        raise ValueError(f"{where} must be an object with a kind, one of {', '.join(questions.KINDS)}")
    kind, takes = question["kind"], questions.params(question["kind"])
    out = {"kind": kind, "prompt": _texts(question.get("prompt"), f"{where}: prompt")}
    for key, value in question.items():
        if key in ("kind", "prompt", "use"):
            continue
        if key not in takes:
            raise ValueError(f"{where}: {kind} takes {', '.join(takes)}; not {key!r}")
        if key in SETTINGS:
            check_settings({key: value}, where)
        else:
            typ, ok, what = QUESTION_ARGS[key]
            if isinstance(value, bool) or not isinstance(value, typ) or not ok(value):
                raise ValueError(f"{where}: {key!r} is {value!r}; it must be {what}")
        out[key] = value
    use = question.get("use", {})
    if not isinstance(use, dict):
        raise ValueError(f"{where}: use must be an object")
    for key, ref in use.items():
        if key not in takes or not isinstance(ref, str) or ref.count(".") != 1 or ref.split(".")[0] not in facts:
            raise ValueError(f"{where}: use {key!r}: {ref!r} must name an argument of {kind} ({', '.join(takes)}) "
                             f"and a fact of this step (fact.field)")
    if use:
        out["use"] = dict(use)
    return out


def question_args(step: Step, values: dict) -> dict:
    """The arguments of the step's question: the step's settings it takes (its head, its row), then the
    question's own, then those filled from the evaluated facts."""
    q = step.question
    takes = questions.params(q["kind"])
    settings = step_settings(step, values)
    args = {k: v for k, v in settings.items() if k in takes}
    args.update({k: v for k, v in q.items() if k in takes})
    args.update({k: _value(values, ref) for k, ref in q.get("use", {}).items()})
    return args


def parse_lesson(data, name: str = "lesson") -> Lesson:
    """A lesson from its JSON object, checked. ValueError naming the step and the field."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise ValueError(f"{name}: a lesson is an object with a title and a non-empty list of steps")
    steps = []
    for i, s in enumerate(data["steps"], start=1):
        where = f"{name}, step {i}"
        if not isinstance(s, dict) or s.get("page") not in PAGES:
            page = s.get("page") if isinstance(s, dict) else s
            raise ValueError(f"{where}: page {page!r} is not one of {', '.join(PAGES)}")
        note = _texts(s.get("note"), f"{where}: note")
        facts, use = check_facts(s.get("facts", {}), s.get("use", {}), note, where)
        question = check_question(s.get("question"), facts, where)
        steps.append(Step(s["page"], check_settings(s.get("settings", {}), where), note, facts, use, question))
    chapter = _texts(data["chapter"], f"{name}: chapter") if data.get("chapter") is not None else {}
    return Lesson(name, _texts(data.get("title"), f"{name}: title"), steps, chapter)


def lesson_path(name: str, folder: Optional[Path] = None) -> Path:
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"{name!r} is not a lesson name: lower-case letters, digits, - and _ (at most 64)")
    return Path(folder or LESSONS_DIR) / f"{name}.json"


def load_lesson(name: str, folder: Optional[Path] = None) -> Lesson:
    """lessons/NAME.json, checked. ValueError for a bad name, a missing or malformed file."""
    path = lesson_path(name, folder)
    if not path.is_file():
        known = ", ".join(list_lessons(folder)) or "none"
        raise ValueError(f"there is no lesson {name!r} (lessons: {known})")
    return parse_lesson(read_json(path, MAX_BYTES), name)


def read_json(path: Path, limit: int):
    """A file's JSON, for a lesson or a question bank: ValueError in one line when it is larger than `limit` bytes or
    not JSON."""
    if path.stat().st_size > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path.name} is not valid JSON: {e}") from None


def list_lessons(folder: Optional[Path] = None) -> list[str]:
    folder = Path(folder or LESSONS_DIR)
    return sorted(p.stem for p in folder.glob("*.json") if NAME.match(p.stem)) if folder.is_dir() else []


def note(texts: dict, lang: str = "en") -> str:
    """The text in `lang`, else the first one there is."""
    return texts.get(lang) or next(iter(texts.values()), "")


def model_and_text(lesson: Lesson, i: int) -> tuple[Optional[str], Optional[str]]:
    """(checkpoint, text) in force at step i: the last ones set by steps 0 … i (what the facts use)."""
    ckpt = text = None
    for s in lesson.steps[:i + 1]:
        ckpt, text = s.settings.get("checkpoint", ckpt), s.settings.get("text", text)
    return ckpt, text


def _value(values: dict, ref: str):
    name, key = ref.split(".")
    if key not in values.get(name, {}):
        raise ValueError(f"fact {name!r} has no field {key!r}; it has {', '.join(values.get(name, {}))}")
    return values[name][key]


def step_settings(step: Step, values: dict) -> dict:
    """The step's settings with every `use` filled from the evaluated facts (name -> field -> value)."""
    return check_settings({**step.settings, **{k: _value(values, ref) for k, ref in step.use.items()}}, "this step")


def fill(text: str, values: dict) -> str:
    """A note with every {fact.field[:spec]} replaced by its value; text values are markdown-escaped."""
    def one(m: re.Match) -> str:
        v = _value(values, f"{m.group(1)}.{m.group(2)}")
        out = format(v, m.group(3) or "")
        return MARKDOWN.sub(r"\\\1", out) if isinstance(v, str) else out
    return PLACEHOLDER.sub(one, text)
