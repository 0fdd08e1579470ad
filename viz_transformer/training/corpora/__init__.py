"""Built-in held-out corpora for head statistics: sentences the shipped models never trained on.

    from viz_transformer.training import corpora
    corpora.load("zh")        # 250 Chinese sentences (Tatoeba test sources), corpora.load("en"): TinyStories

Made by `python -m viz_transformer.training.corpora.build` (see that file and SOURCES.md for how and the credits).
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = {"zh": "heldout_zh.txt", "en": "heldout_en.txt"}
MAX_LINES = 5000          # a corpus (built-in or uploaded) is cut here: a pass stays minutes, not hours


def load(lang: str) -> list[str]:
    """The built-in held-out sentences for "zh" (translator) or "en" (story model)."""
    if lang not in FILES:
        raise ValueError(f"no built-in corpus for {lang!r}; there is one for {', '.join(FILES)}")
    return parse((HERE / FILES[lang]).read_text(encoding="utf-8"))


def for_model(cfg) -> str:
    """Which built-in corpus fits a model: Chinese for a translator, English for a language model."""
    return "zh" if cfg.is_encoder_decoder else "en"


def parse(text: str) -> list[str]:
    """One sentence a line; blank lines are skipped; at most MAX_LINES. ValueError when nothing is left."""
    lines = [s.strip() for s in str(text).splitlines()]
    lines = [s for s in lines if s][:MAX_LINES]
    if not lines:
        raise ValueError("the corpus has no sentences: give one sentence a line")
    return lines
