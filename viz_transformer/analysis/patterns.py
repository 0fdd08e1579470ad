"""Attention patterns read from a capture: a block's patterns, one head's pattern and its q, k, v, heads
reduced, pieces pooled into words, big matrices pooled into tiles, windows on long axes, the strongest links.

Pure torch/numpy: no streamlit, no plotly. Labels are in piece_labels.py, the step-by-step maths in
attention_maths.py, masks in mask_examples.py, positions in positions.py, decoding traces in decoding_steps.py,
training curves in training_curves.py.
"""
from __future__ import annotations

import numpy as np
import torch

from viz_transformer.core.attention import attention
from viz_transformer.core.positional import position_terms
from viz_transformer.core.hook_names import BLOCKS, available_blocks, hook_name, n_layers  # noqa: F401  (the pages' names)
from viz_transformer.core.tokenizer import group_words, word_labels


def block_patterns(cache, block: str) -> torch.Tensor:
    """Every layer's pattern of a block: [layer, head, q, k]."""
    part, attn = BLOCKS[block]
    return cache.stack(f"{attn}.hook_pattern", part=part)


def layer_patterns(cache, block: str, layer: int, batch: int = 0) -> torch.Tensor:
    """One layer's pattern of a block: [head, q, k] (a compact run recomputes that layer alone)."""
    return cache[hook_name(block, layer, "hook_pattern")][batch]


def reduce_heads(pattern: torch.Tensor, how: str = "mean") -> torch.Tensor:
    """[head, q, k] -> [q, k], mean or max over heads."""
    if how == "mean":
        return pattern.mean(0)
    if how == "max":
        return pattern.max(0).values
    raise ValueError(f"how must be 'mean' or 'max', not {how!r}")


def aggregate_words(pattern: torch.Tensor, q_groups: list[list[int]], k_groups: list[list[int]]) -> torch.Tensor:
    """[..., q, k] pieces -> [..., q_words, k_words]: keys of a word are summed (the attention a
    word receives is the total its pieces get), queries of a word are averaged (so rows still sum to 1)."""
    cols = torch.stack([pattern[..., g].sum(-1) for g in k_groups], -1)          # (..., q, kw)
    return torch.stack([cols[..., g, :].mean(-2) for g in q_groups], -2)        # (..., qw, kw)


def word_level(pattern: torch.Tensor, q_pieces: list[str], k_pieces: list[str]):
    """Word-level attention and its labels: (matrix [..., qw, kw], q_labels, k_labels)."""
    qg, kg = group_words(q_pieces), group_words(k_pieces)
    return aggregate_words(pattern, qg, kg), word_labels(q_pieces, qg), word_labels(k_pieces, kg)


def downsample(m, max_rows: int, max_cols: int, how: str = "max"):
    """Shrink a [R, C] matrix to at most [max_rows, max_cols] by pooling contiguous blocks.

    how: "max" keeps every block's maximum (sharp heads stay visible), "sum" keeps totals,
    "mean" keeps averages. Returns (pooled array, row_starts, col_starts): block i covers rows
    row_starts[i] .. row_starts[i+1]-1.
    """
    a = np.asarray(m, dtype=np.float64)
    R, C = a.shape
    rs = np.unique(np.linspace(0, R, min(R, max_rows) + 1).astype(int))[:-1]
    cs = np.unique(np.linspace(0, C, min(C, max_cols) + 1).astype(int))[:-1]
    if how == "max":
        out = np.maximum.reduceat(np.maximum.reduceat(a, rs, axis=0), cs, axis=1)
    elif how in ("sum", "mean"):
        out = np.add.reduceat(np.add.reduceat(a, rs, axis=0), cs, axis=1)
        if how == "mean":
            out = out / np.outer(np.diff(np.append(rs, R)), np.diff(np.append(cs, C)))
    else:
        raise ValueError(f"how must be 'max', 'sum' or 'mean', not {how!r}")
    return out, rs, cs


def model_view_tiles(patterns, max_size: int = 32) -> list[list[np.ndarray]]:
    """[layer, head, q, k], or one [head, q, k] per layer read one at a time -> tiles[layer][head], each
    max-pooled to at most max_size × max_size."""
    return [[downsample(layer[h], max_size, max_size, "max")[0] for h in range(layer.shape[0])] for layer in patterns]


def token_window(n: int, start: int, size: int) -> tuple[int, int]:
    """A [a, b) window of at most `size` positions starting near `start`, clipped to 0..n."""
    size = min(size, n)
    a = max(0, min(int(start), n - size))
    return a, a + size


def axis_windows(n_query: int, n_key: int, start: int, size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Windows of at most `size` positions for the query axis and the key axis, each starting near
    `start` and clipped to its own length: ((q_a, q_b), (k_a, k_b)), half-open. Cross-attention with
    20 queries and 60 keys keeps all 20 queries while the keys scroll."""
    return token_window(n_query, start, size), token_window(n_key, start, size)


def head_matrix(layer_patterns: torch.Tensor, head, q_pieces: list[str], k_pieces: list[str],
                words: bool = False):
    """One matrix for the heatmap: a head (int) or "mean"/"max" over heads of [head, q, k], at
    piece or word level. Words are aggregated per head first, then reduced, so a max over heads
    stays a weight in [0, 1]. Returns (matrix [q, k], q_labels, k_labels)."""
    pats, ql, kl = layer_patterns, list(q_pieces), list(k_pieces)
    if words:
        pats, ql, kl = word_level(layer_patterns, q_pieces, k_pieces)             # (H, qw, kw)
    mat = pats[head] if isinstance(head, int) else reduce_heads(pats, head)
    return mat, ql, kl


def line_edges(pattern, min_weight: float = 0.0, max_lines: int = 300) -> list[tuple[int, int, float]]:
    """The strongest (query, key, weight) links of a [q, k] pattern, at most max_lines, heaviest first."""
    a = np.asarray(pattern, dtype=np.float64)
    qi, ki = np.nonzero(a >= max(min_weight, 1e-12))
    w = a[qi, ki]
    order = np.argsort(-w, kind="stable")[:max_lines]
    return [(int(qi[o]), int(ki[o]), float(w[o])) for o in order]


def head_qkv(cache, block: str, layer: int, head: int, batch: int = 0):
    """Captured (q [T, d], k [S, d], v [S, d], mask [T, S]) of one head, as its scores use them: q and k after
    the rotation (RoPE), k and v of the key/value head this query head reads (grouped-query attention)."""
    rot = hook_name(block, layer, "hook_rot_q") in cache
    q_all = cache[hook_name(block, layer, "hook_rot_q" if rot else "hook_q")]
    k_all = cache[hook_name(block, layer, "hook_rot_k" if rot else "hook_k")]
    kv_head = head // (q_all.shape[2] // k_all.shape[2])
    q, k = q_all[batch, :, head, :], k_all[batch, :, kv_head, :]
    v = cache[hook_name(block, layer, "hook_v")][batch, :, kv_head, :]
    mask = cache[hook_name(block, layer, "hook_mask")][batch, 0]
    return q, k, v, mask


def head_pattern(cache, block: str, layer: int, head: int, batch: int = 0) -> torch.Tensor:
    """One head's pattern [q, k]. A compact run (viz_transformer.run.derived_cache) recomputes a pattern on every read,
    every head of the layer: for one head only that head is recomputed, from its own q, k, v and mask."""
    name = hook_name(block, layer, "hook_pattern")
    if name in getattr(cache, "derived", {}):
        divisor, bias = position_terms(cache, hook_name(block, layer, "hook_pattern").rsplit(".", 1)[0], head)
        return attention(*head_qkv(cache, block, layer, head, batch), divisor, bias=bias).weights   # the model's maths
    return cache[name][batch, head]
