"""Which writing system a text is written in (Chinese characters or Latin letters), and which one a model
reads: the app says so when a text cannot be what the model was trained on (English typed into the
Chinese-to-English translator gives fluent nonsense).

A text's script is counted in words, not characters: a Chinese character is about a word, a run of Latin
letters is one word, so "我爱Tom。" is Chinese and "I love 北京" is mixed (neither dominates).
A model's script is read from what it was trained on, as its checkpoint records it: the pieces seen in its
training inputs (meta.json's confidence statistics, `python -m viz_transformer calibrate`), else the source
sentences of its demo translations; a checkpoint recording neither has no known script (None).
"""
from __future__ import annotations

import re
from typing import Optional

from viz_transformer.analysis.confidence import KEY, unbits

HAN, LATIN = "han", "latin"
SCRIPTS = (HAN, LATIN)
DOMINANT = 1 / 2            # a script dominates with more than this share of a text's words
# CJK Unified Ideographs with extension A, and the compatibility ideographs
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# Latin letters: ASCII, Latin-1 and Latin Extended-A/B (accents included); digits and symbols are no script
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]+")


def counts(text: str) -> dict[str, int]:
    """Words of each script in a text: Chinese characters one each, runs of Latin letters one each."""
    return {HAN: len(_HAN.findall(text)), LATIN: len(_LATIN_WORD.findall(text))}


def dominant(text: str) -> Optional[str]:
    """HAN or LATIN when that script has more than DOMINANT of the text's words; None for a text with
    no letters or a mixed one."""
    c = counts(text)
    total = sum(c.values())
    best = max(SCRIPTS, key=c.__getitem__)
    return best if total and c[best] > DOMINANT * total else None


def training_sample(tok, meta: dict) -> str:
    """The text the model's script is read from: the pieces seen in its training inputs (one per line),
    else its demo sources; "" when the checkpoint records neither."""
    seen = ((meta.get(KEY) or {}).get("pieces") or {}).get("seen")
    if seen:
        ids = sorted(i for i in unbits(seen) if i < tok.vocab_size)
        return "\n".join(tok.decode([i]) for i in ids)
    demo = meta.get("demo")
    return "\n".join(demo) if isinstance(demo, dict) else ""


BOTH = 1 / 4                # a model reads both scripts when each dominates at least this share of its demo texts


def model_script(tok, meta: Optional[dict]) -> Optional[str]:
    """The script a model reads (its source language's, or a language model's), None when unknown, and None for a
    model whose demo texts are written in both (a masked LM trained on both sides of the pairs reads either)."""
    meta = meta or {}
    demo = meta.get("demo")
    if not ((meta.get(KEY) or {}).get("pieces") or {}).get("seen") and isinstance(demo, dict) and demo:
        per_text = [dominant(t) for t in demo]
        if all(per_text.count(sc) >= BOTH * len(per_text) for sc in SCRIPTS):
            return None
    return dominant(training_sample(tok, meta))


def mismatch(text: str, source: Optional[str]) -> Optional[str]:
    """The text's script when it is clearly another than the model's `source` script, else None."""
    got = dominant(text)
    return got if source is not None and got is not None and got != source else None
