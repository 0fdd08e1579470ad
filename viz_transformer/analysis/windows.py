"""The rows of a long text's attention patterns and rollouts that a heatmap's window shows, computed without
the whole [q, k] matrices: a compact run's patterns from the captured q, k and mask of those rows alone (the
model's own `attention`), a rollout's rows carried down the layers over the positions they can reach.

At 2,048 pieces a Qwen2.5-0.5B-sized model's one layer is 14 × 2,112² weights; a 52-row window needs 52 rows
of it, and a rollout's 52 rows a (52 × T) · (T × T) product per layer instead of T³. Pure torch, no figures.
"""
from __future__ import annotations

import torch

from viz_transformer.analysis.pattern_rows import pattern_rows  # noqa: F401  (re-exported: the pages' name)
from viz_transformer.analysis.patterns import reduce_heads
from viz_transformer.analysis.sinks import without_sink
from viz_transformer.core.hook_names import hook_name, layer_name


def closed_prefix(mask: torch.Tensor, end: int) -> int:
    """The smallest m ≥ end such that no query row < m may attend to a key ≥ m (mask [q, k], True = may
    attend): the positions rows < end can reach through any number of layers. Causal: end; a prefix LM
    whose prefix is longer: the prefix; attention both ways: every position."""
    m = max(0, min(int(end), mask.shape[-1]))
    while m < mask.shape[-1]:
        reach = mask[:m, m:].nonzero()
        if not len(reach):
            break
        m = m + int(reach[:, 1].max()) + 1
    return m


def head_window(cache, block: str, layer: int, head, rows: tuple[int, int], cols: tuple[int, int],
                no_sink: bool = False, batch: int = 0) -> torch.Tensor:
    """The [rows, cols] window of one head's pattern (head an int), or of the mean/max over heads ("mean",
    "max"), as patterns.head_matrix gives it for the whole layer; no_sink: each row renormalised without
    position 0 first (sinks.without_sink, over all its keys)."""
    p = pattern_rows(cache, block, layer, rows, heads=[head] if isinstance(head, int) else None, batch=batch)
    p = without_sink(p, [0]) if no_sink else p
    return (p[0] if isinstance(head, int) else reduce_heads(p, head))[:, cols[0]:cols[1]]


def layer_windows(cache, block: str, n_layers: int, rows: tuple[int, int], cols: tuple[int, int], batch: int = 0):
    """Every layer's [head, rows, cols] window, one layer at a time (the model view of a long text's window)."""
    for layer in range(n_layers):
        yield pattern_rows(cache, block, layer, rows, batch=batch)[..., cols[0]:cols[1]]


def rollout_rows(cache, part: str, rows: tuple[int, int], batch: int = 0, residual: float = 0.5) -> torch.Tensor:
    """Rows [a, b) of summaries.rollout(cache, part): [b - a, T]. R[a:b] = Â_L[a:b] Â_(L−1) ⋯ Â_1, carried
    down one layer at a time over the positions those rows can reach (closed_prefix of layer 0's mask:
    causal rows 0..b−1 need no later position), each Â_l from pattern_rows (the heads' mean in float32, as the
    patterns are; the products in float64). Columns past them are 0."""
    n = cache.n_layers.get(part)
    if not n:
        raise KeyError(f"this model has no {part!r} layers")
    block = f"{part}.self_attn"
    mask = cache[layer_name(part, 0, "self_attn.hook_mask")][batch, 0]
    T = mask.shape[-1]
    a, b = max(0, rows[0]), min(T, rows[1])
    m = closed_prefix(mask, b)
    out = None
    for layer in reversed(range(n)):
        lo, hi = (a, b) if out is None else (0, m)                                       # the top layer: the rows
        step = pattern_rows(cache, block, layer, (lo, hi), m, batch=batch).mean(0).double()  # (hi - lo, m)
        step.mul_(1 - residual).diagonal(lo).add_(residual)                              # + residual · I[lo:hi]
        step = step / step.sum(-1, keepdim=True)
        out = step if out is None else out @ step                                        # (b - a, m)
    full = torch.zeros(b - a, T, dtype=torch.float64)
    full[:, :m] = out
    return full.float()


def source_attribution_rows(cache, rows: tuple[int, int], batch: int = 0) -> torch.Tensor:
    """Rows [a, b) of summaries.source_attribution: the mean over heads of the last decoder layer's
    cross-attention rows, carried down the encoder's layers (Â_L ⋯ Â_1) as rollout_rows does: [b - a, S]."""
    if not cache.n_layers.get("encoder") or not cache.n_layers.get("decoder"):
        raise ValueError("source attribution needs an encoder-decoder model")
    last = cache.n_layers["decoder"] - 1
    out = pattern_rows(cache, "decoder.cross_attn", last, rows, batch=batch).mean(0).double()    # (w, S)
    S = out.shape[-1]
    for layer in reversed(range(cache.n_layers["encoder"])):
        p = pattern_rows(cache, "encoder.self_attn", layer, (0, S), batch=batch).mean(0).double()
        step = 0.5 * p + 0.5 * torch.eye(S, dtype=torch.float64)
        out = out @ (step / step.sum(-1, keepdim=True))
    return out.float()
