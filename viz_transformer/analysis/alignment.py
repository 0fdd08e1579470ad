"""Which source word a decoding step reads: the pieces of a word, each head's most-read source piece, and
the heads that align a target word with its source word (我 → I, 是 → am, 一名 → an, 工程师 → engineer).

Pure tensor maths on cross-attention weights [layer, head, key] of one decoder row; no model runs here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from viz_transformer.core.hook_names import hook_name
from viz_transformer.core.tokenizer import WORD_START


def source_span(pieces: list[str], word: str) -> range:
    """The positions of the first run of consecutive pieces that spell `word` (▁ ignored): 工程师 over
    工 · 程 · 师, or one piece 工程师. ValueError when no run spells it."""
    bodies = [p.replace(WORD_START, "") for p in pieces]
    target = word.replace(WORD_START, "")
    for a in range(len(bodies)):
        if not bodies[a]:                     # a bare ▁ starts no word
            continue
        text = ""
        for b in range(a, len(bodies)):
            text += bodies[b]
            if text == target:
                return range(a, b + 1)
            if not target.startswith(text):
                break
    raise ValueError(f"no run of pieces spells {word!r}: {' '.join(pieces)}")


@dataclass
class HeadRead:
    layer: int
    head: int
    key: int             # the source position this head's row gives its largest weight
    weight: float        # that weight


def head_reads(weights: torch.Tensor) -> list[HeadRead]:
    """Every head's most-read key in one row: weights [layer, head, key] -> one HeadRead per head,
    layer by layer."""
    top_w, top_k = weights.max(-1)                                   # (layer, head)
    return [HeadRead(l, h, int(top_k[l, h]), float(top_w[l, h]))
            for l in range(weights.shape[0]) for h in range(weights.shape[1])]


def aligned_heads(weights: torch.Tensor, span: range) -> list[HeadRead]:
    """The heads whose largest weight in this row [layer, head, key] falls on a piece of `span`, the
    strongest first."""
    return sorted((r for r in head_reads(weights) if r.key in span), key=lambda r: -r.weight)


def reads_by_piece(weights: torch.Tensor, pieces: list[str]) -> list[tuple[str, int]]:
    """How many heads give their largest weight in this row [layer, head, key] to each key piece, the most
    read first (pieces no head reads most are left out): the step's alignment at a glance."""
    counts: dict[int, int] = {}
    for r in head_reads(weights):
        counts[r.key] = counts.get(r.key, 0) + 1
    return [(pieces[k], n) for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def step_cross_weights(step, n_layers: int) -> torch.Tensor:
    """A decoding step's cross-attention row in every layer (trace.Step.attention): [layer, head, key]."""
    return torch.stack([step.attention[hook_name("decoder.cross_attn", l, "hook_pattern")] for l in range(n_layers)])
