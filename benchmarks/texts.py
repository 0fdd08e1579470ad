"""Benchmark texts of a given length in pieces, made from the shared corpora (never from the test split's
order: a seeded shuffle of the whole file), distinct for each seed.

    text_of(tok, 128, seed=3)        # Chinese text whose source encoding is 128 pieces ([end] included)
"""
from __future__ import annotations

import random
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZH = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba-cmn-eng.tsv"
EN = ROOT.parent / "shared" / "data" / "lm" / "tinystories-2MiB.txt"
FALLBACK_ZH = ["我是一名工程师。", "今天天气很好。", "我的猫喜欢睡觉。", "我们明天在学校门口见面。", "他是我的朋友。"]
FALLBACK_EN = ["Once upon a time there was a little dog.", "The cat sat on the mat and looked at the bird."]


@lru_cache(maxsize=2)
def sentences(lang: str) -> tuple[str, ...]:
    if lang == "zh" and ZH.exists():
        rows = [line.split("\t")[0] for line in ZH.read_text(encoding="utf-8").splitlines()[1:]]
        return tuple(r for r in rows if r)
    if lang == "en" and EN.exists():
        text = EN.read_text(encoding="utf-8").replace("<|endoftext|>", " ")
        return tuple(s.strip() + "." for s in text.split(".") if len(s.strip()) > 3)
    corpus = ZH if lang == "zh" else EN
    print(f"benchmarks.texts: {corpus} is missing (the corpora, ../shared/data, are not beside this tree); "
          f"the {lang} texts repeat {len(FALLBACK_ZH if lang == 'zh' else FALLBACK_EN)} built-in sentences, so "
          f"numbers are not comparable with runs on the corpus", file=sys.stderr)
    return tuple(FALLBACK_ZH if lang == "zh" else FALLBACK_EN)


def text_of(tok, n: int, seed: int = 0, lang: str = "zh") -> str:
    """A text whose encoding is exactly n pieces with the final [end] (n - 1 pieces of text), or as close
    as the tokenizer allows: sentences are added until the count is reached, then the last is cut."""
    pool = list(sentences(lang))
    random.Random(seed).shuffle(pool)
    joiner = "" if lang == "zh" else " "
    text, i = "", 0
    while len(tok.encode(text)) < n - 1:
        text = (text + joiner + pool[i % len(pool)]).strip()
        i += 1
    while len(tok.encode(text)) > n - 1 and text:       # trim characters from the end
        text = text[:-1]
    return text
