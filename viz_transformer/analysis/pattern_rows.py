"""Query rows of one layer's attention pattern without the whole [head, q, k] matrix: a stored pattern sliced, a
compact run's recomputed from the captured q, k and mask of those rows alone (the model's own `attention`'s steps,
core.attention.weights_from_qk; its q·kᵀ in blocks of rows, equal to the captured pattern to float rounding: some CPUs
round a product of another shape otherwise). Read by windows (a heatmap's window) and head_sums (Head statistics'
sums, a block of rows at a time)."""
from __future__ import annotations

import math

import torch

from viz_transformer.core.attention import weights_from_qk
from viz_transformer.core.hook_names import hook_name
from viz_transformer.core.positional import position_terms


def key_end(allowed: torch.Tensor) -> int:
    """1 + the last key any row of `allowed` [.., rows, K] may attend to: the keys those rows' pattern needs."""
    cols = allowed.reshape(-1, allowed.shape[-1]).any(0).nonzero()
    return int(cols.max()) + 1 if len(cols) else 1


def _named(sel) -> str:
    return f"{sel.start}..{sel.stop - 1}" if isinstance(sel, slice) else f"{sel.tolist()[:4]}…"


def pattern_rows(cache, block: str, layer: int, rows, n_keys: int | None = None,
                 heads=None, batch: int = 0, with_scores: bool = False):
    """Query rows [a, b) of one layer's pattern over keys [0, n_keys): [head, b - a, n_keys] (`heads`: a list
    of heads, default all); `rows` may instead be a 1-D tensor of query positions (evenly spaced ones, say), the
    pattern's rows in that order. A stored pattern is sliced; a compact run's (recomputed on read) comes from the
    captured q of those rows, k and the mask with the model's `attention`, never the whole layer. n_keys must
    cover every key the rows may attend to, or their softmax would be another one: ValueError. with_scores:
    (pattern, the masked scores its softmax read, the same shape), the scores None for a stored pattern."""
    sel = slice(*rows) if isinstance(rows, tuple) else torch.as_tensor(rows, dtype=torch.long)
    name = hook_name(block, layer, "hook_pattern")
    if name not in getattr(cache, "derived", {}):
        p = cache[name][batch][:, sel, :n_keys]                      # those rows first: never the whole pattern copied
        p = p[list(range(p.shape[0])) if heads is None else list(heads)]     # a copy: the stored pattern stays as it is
        return (p, None) if with_scores else p
    prefix = name.rsplit(".", 1)[0]
    rot = f"{prefix}.hook_rot_q" in cache
    q_all = cache[f"{prefix}.hook_rot_q" if rot else f"{prefix}.hook_q"][batch]          # (T, nh, hs)
    k_all = cache[f"{prefix}.hook_rot_k" if rot else f"{prefix}.hook_k"][batch]          # (S, nkv, hs)
    mask = cache[f"{prefix}.hook_mask"][batch, 0]                                        # (T, S)
    S = k_all.shape[0] if n_keys is None else n_keys
    if mask[sel, S:].any():
        raise ValueError(f"rows {_named(sel)} may attend to keys past {S - 1}: their pattern needs every key "
                         f"they can see")
    divisor, bias = position_terms(cache, prefix)
    divisor = math.sqrt(q_all.shape[-1]) if divisor is None else divisor
    if bias is not None:                                                                 # T5: [1, head, q, k]
        bias = bias[0][:, sel, :S]
        bias = bias if heads is None else bias[list(heads)]
    mask, q_rows = mask[sel, :S], q_all[sel]
    n_kv, group = k_all.shape[1], q_all.shape[1] // k_all.shape[1]                     # grouped-query attention
    if heads is None:           # every head: each key head's product with its group's queries, no key copied per head
        w, hs = q_rows.shape[0], q_all.shape[-1]
        q = q_rows.reshape(w, n_kv, group, hs).permute(1, 2, 0, 3).reshape(n_kv, group * w, hs)
        qk = (q @ k_all[:S].transpose(0, 1).transpose(-2, -1)).view(n_kv * group, w, S)  # (H, w, S)
    else:
        heads = list(heads)
        q = q_rows[:, heads].transpose(0, 1)                                             # (h, w, hs)
        k = k_all[:S, [h // group for h in heads]].transpose(0, 1)                       # (h, S, hs)
        qk = q @ k.transpose(-2, -1)
    return weights_from_qk(qk, mask, divisor, bias, with_scores)
