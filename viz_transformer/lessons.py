"""Lessons: a guided path through the app, one JSON file in lessons/ per lesson.

    {"title": {"en": "...", "zh": "..."},
     "steps": [{"page": "attention", "settings": {"checkpoint": "zh-en", "text": "我是一名工程师。",
                "block": "encoder.self_attn", "layer": 0, "head": 3}, "note": {"en": "...", "zh": "..."}}]}

A step names a page and its settings in the app's own words (SETTINGS); the app maps them onto its
widgets. `load_lesson` checks a file and raises ValueError naming the step and the field.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

LESSONS_DIR = Path(__file__).resolve().parent.parent / "lessons"
PAGES = ("overview", "attention", "step_by_step", "masks", "positional", "decoding", "knockout", "positions",
         "compare", "lens", "patching")
LANGS = ("en", "zh")
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")      # a lesson's file name (without .json): safe in a URL
MAX_BYTES = 200_000

# the tabs of the pages that have them: step_by_step (qkv … why), masks (padding … applied)
TABS = ("qkv", "scores", "output", "why", "padding", "causal", "applied")
# setting -> (type, check, what it is): the settings a step may carry
SETTINGS: dict[str, tuple[type, Any, str]] = {
    "checkpoint": (str, None, "a checkpoint folder name, e.g. zh-en"),
    "text": (str, lambda v: 0 < len(v) <= 20_000, "the sidebar text (1 … 20,000 characters)"),
    "block": (str, lambda v: v in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"),
              "encoder.self_attn, decoder.self_attn or decoder.cross_attn"),
    "layer": (int, lambda v: 0 <= v < 64, "a layer (0 … 63)"),
    "head": (int, lambda v: 0 <= v < 64, "a head (0 … 63)"),
    "row": (int, lambda v: 0 <= v < 4096, "a query row of the step-by-step page"),
    "words": (bool, None, "word-level attention (true/false)"),
    "strategy": (str, lambda v: v in ("greedy", "sample", "beam"), "greedy, sample or beam"),
    "max_new_tokens": (int, lambda v: 1 <= v <= 60, "1 … 60"),
    "beam_width": (int, lambda v: 1 <= v <= 8, "1 … 8"),
    "ablate": (list, lambda v: all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
                                   and isinstance(x[1], int) for x in v),
               'knocked-out heads, e.g. [["decoder.1.cross_attn", 3]]'),
    "ablate_mode": (str, lambda v: v in ("zero", "uniform", "mean"), "zero, uniform or mean"),
    "permutation": (str, lambda v: v in ("reverse", "swap"), "reverse or swap"),
    "other_text": (str, lambda v: 0 < len(v) <= 20_000, "the second text (compare, patching)"),
    "over": (str, lambda v: v in ("heads", "blocks", "resid"), "heads, blocks or resid"),
    "prefix_len": (int, lambda v: 1 <= v < 4096, "the prefix length shown on the masks page"),
    "lens_step": (int, lambda v: 0 <= v < 4096, "the decoding step the lens marks"),
    "tab": (str, lambda v: v in TABS, "the open tab: " + ", ".join(TABS)),
}


@dataclass
class Step:
    page: str
    settings: dict = field(default_factory=dict)
    note: dict = field(default_factory=dict)          # language -> text (markdown)

    def to_dict(self) -> dict:
        return {"page": self.page, "settings": dict(self.settings), "note": dict(self.note)}


@dataclass
class Lesson:
    name: str
    title: dict                                       # language -> text
    steps: list[Step]

    def to_dict(self) -> dict:
        return {"title": dict(self.title), "steps": [s.to_dict() for s in self.steps]}

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
        steps.append(Step(s["page"], check_settings(s.get("settings", {}), where), _texts(s.get("note"), f"{where}: note")))
    return Lesson(name, _texts(data.get("title"), f"{name}: title"), steps)


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
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_BYTES} bytes")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path.name} is not valid JSON: {e}") from None
    return parse_lesson(data, name)


def list_lessons(folder: Optional[Path] = None) -> list[str]:
    folder = Path(folder or LESSONS_DIR)
    return sorted(p.stem for p in folder.glob("*.json") if NAME.match(p.stem)) if folder.is_dir() else []


def note(texts: dict, lang: str = "en") -> str:
    """The text in `lang`, else the first one there is."""
    return texts.get(lang) or next(iter(texts.values()), "")
