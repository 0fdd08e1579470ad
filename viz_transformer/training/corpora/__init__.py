"""Built-in held-out corpora for head statistics: sentences the shipped models never trained on.

    from viz_transformer.training import corpora
    corpora.load("zh")        # 250 Chinese sentences (Tatoeba test sources), corpora.load("en"): TinyStories

Made by `python -m viz_transformer.training.corpora.build` (see that file and SOURCES.md for how and the credits).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
FILES = {"zh": "heldout_zh.txt", "en": "heldout_en.txt"}
MAX_LINES = 5000          # the most sentences a corpus holds in the app (a pass stays minutes, not hours); the
                          # command line reads any length, MAX_LINES at a time (chunks)


class TooLong(ValueError):
    """A corpus of more than MAX_LINES sentences given to the app."""

    def __init__(self, n: int, most: int):
        super().__init__(f"the corpus has {n:,} sentences; at most {most:,} are read here "
                         "(the command line reads any length)")
        self.n, self.most = n, most


def load(lang: str) -> list[str]:
    """The built-in held-out sentences for "zh" (translator) or "en" (story model)."""
    if lang not in FILES:
        raise ValueError(f"no built-in corpus for {lang!r}; there is one for {', '.join(FILES)}")
    return parse((HERE / FILES[lang]).read_text(encoding="utf-8"))


def for_model(cfg) -> str:
    """Which built-in corpus fits a model: Chinese for a translator, English for a language model."""
    return "zh" if cfg.is_encoder_decoder else "en"


def parse(text: str, most: Optional[int] = None) -> list[str]:
    """One sentence a line; blank lines are skipped. ValueError when nothing is left, TooLong past `most` (default
    MAX_LINES)."""
    most = MAX_LINES if most is None else most
    lines = [s.strip() for s in str(text).splitlines()]
    lines = [s for s in lines if s]
    if not lines:
        raise ValueError("the corpus has no sentences: give one sentence a line")
    if len(lines) > most:
        raise TooLong(len(lines), most)
    return lines


def chunks(path, size: int = MAX_LINES):
    """A corpus file read a chunk at a time, however long: (sentences seen so far, the next `size` non-blank lines
    stripped), so a pass never holds the whole file. ValueError for a file with no sentence, or not UTF-8."""
    seen, chunk = 0, []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    chunk.append(line.strip())
                if len(chunk) == size:
                    yield seen, chunk
                    seen, chunk = seen + size, []
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    if chunk or not seen:
        if not chunk:
            raise ValueError("the corpus has no sentences: give one sentence a line")
        yield seen, chunk


def count(path) -> int:
    """The sentences (non-blank lines) of a corpus file, read a line at a time."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if line.strip())
