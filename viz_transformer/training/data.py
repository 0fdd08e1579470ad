"""Corpora for training and evaluation: parallel pairs (TSV or two files) and plain text.

Splits are made by a seeded shuffle, so `evaluate` can rebuild the exact held-out test set.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import torch

STORY_SEPARATOR = "<|endoftext|>"
# 3AM captions are tokenized ("white - haired", "man 's"): undo the common cases
_DETOK = [(re.compile(r" - "), "-"), (re.compile(r" (['’](s|re|ve|ll|d|m|t)\b)"), r"\1"),
          (re.compile(r" n't\b"), "n't"), (re.compile(r" ([.,!?;:%)])"), r"\1"), (re.compile(r"\( "), "(")]


def detokenize(text: str) -> str:
    for pat, rep in _DETOK:
        text = pat.sub(rep, text)
    return text


def read_pairs(path, tgt_path=None, detok: bool = False) -> list[tuple[str, str]]:
    """Source/target pairs from a TSV (header `zh<TAB>en...` allowed) or two line-aligned files."""
    path = Path(path)
    if tgt_path is not None:
        src = path.read_text(encoding="utf-8").splitlines()
        tgt = Path(tgt_path).read_text(encoding="utf-8").splitlines()
        if len(src) != len(tgt):
            raise ValueError(f"{path} has {len(src)} lines but {tgt_path} has {len(tgt)}")
        pairs = list(zip(src, tgt))
    else:
        pairs = parse_pairs(path.read_text(encoding="utf-8"), str(path))
    out = [(s.strip(), detokenize(t.strip()) if detok else t.strip()) for s, t in pairs]
    return [(s, t) for s, t in out if s and t]


def parse_pairs(text: str, name: str = "the corpus") -> list[tuple[str, str]]:
    """source<TAB>target lines (a header `zh<TAB>en` allowed; blank lines skipped), stripped, both sides kept."""
    pairs = []
    for n, line in enumerate(text.splitlines()):
        cols = line.split("\t")
        if (n == 0 and cols[:2] == ["zh", "en"]) or not line.strip():
            continue                          # header
        if len(cols) < 2:
            raise ValueError(f"{name}:{n + 1}: expected at least two tab-separated columns (source, reference)")
        pairs.append((cols[0].strip(), cols[1].strip()))
    pairs = [(s, t) for s, t in pairs if s and t]
    if not pairs:
        raise ValueError(f"{name} has no source<TAB>reference line")
    return pairs


def split(items: list, seed: int, n_test: int, n_val: int):
    """Seeded shuffle, then (train, val, test)."""
    items = list(items)
    random.Random(seed).shuffle(items)
    test, val, train = items[:n_test], items[n_test:n_test + n_val], items[n_test + n_val:]
    return train, val, test


def split_by_source(pairs: list[tuple[str, str]], seed: int, n_test: int, n_val: int):
    """Source-disjoint (train, val, test): pairs are grouped by their source sentence, the unique
    sources shuffled by seed, and whole groups go to test until it holds at least n_test pairs, then
    to val until it holds at least n_val, the rest to train. No source is in two splits, so a
    held-out score never rewards remembering a training sentence."""
    groups: dict[str, list] = {}
    for p in pairs:
        groups.setdefault(p[0], []).append(p)
    sources = list(groups)
    random.Random(seed).shuffle(sources)
    test, val, train = [], [], []
    for s in sources:
        (test if len(test) < n_test else val if len(val) < n_val else train).extend(groups[s])
    return train, val, test


def unseen_sources(items: list[tuple[str, str]], train: list[tuple[str, str]]):
    """(pairs whose source never occurs in train, how many were dropped)."""
    seen = {s for s, _ in train}
    kept = [p for p in items if p[0] not in seen]
    return kept, len(items) - len(kept)


def read_stories(path) -> list[str]:
    """Plain text split into documents at <|endoftext|> (at blank lines if there is none)."""
    return parse_stories(Path(path).read_text(encoding="utf-8"))


def parse_stories(text: str) -> list[str]:
    """read_stories of text in hand."""
    sep = STORY_SEPARATOR if STORY_SEPARATOR in text else "\n\n"   # plain text: paragraphs
    docs = [d.strip() for d in text.split(sep)]
    return [d for d in docs if d]


def token_stream(docs: list[str], tok) -> torch.Tensor:
    """Every document as [begin] pieces [end], concatenated into one 1-D id tensor."""
    ids: list[int] = []
    for d in docs:
        ids += [tok.bos_id] + tok.encode(d) + [tok.eos_id]
    return torch.tensor(ids, dtype=torch.long)


def blocks(ids: torch.Tensor, block_size: int) -> torch.Tensor:
    """Non-overlapping windows of block_size + 1 ids (input and shifted target): [n, block_size + 1]."""
    n = (len(ids) - 1) // block_size
    return torch.stack([ids[i * block_size: i * block_size + block_size + 1] for i in range(n)])
