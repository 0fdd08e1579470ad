"""The sums behind Head statistics, from one read of a layer's attention pattern a block of query rows at a time:
every summaries.STATS quantity per head (summaries.head_stats) and each key's weight over the rows an attention-sink
share counts (sinks.sink_shares). A block's rows come from pattern_rows (sliced, or recomputed from the captured q, k
and mask, over the keys those rows may see); the per-row quantities are computed in the pattern's own float32 and
summed over rows in float64."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from viz_transformer.analysis.pattern_rows import key_end, pattern_rows
from viz_transformer.core.hook_names import hook_name

ROWS_AT_ONCE = 64       # query rows read at once (all heads): at 2,048 keys and 14 heads a 7 MB float32 block, whose
                        # passes stay in cache; fewer rows a block pay more per-block overhead, more fall out of cache
                        # (benchmarks/head_stats_cpu.py compares sizes)


@dataclass
class LayerSums:
    """One layer's sums over its n_rows query rows, per head.

    stats        STATS name -> [H] float64 sum over the rows (prev_token over rows q ≥ 1; self and prev_token only
                 for self-attention), when asked for
    key_weight   [H, K] float64: Σ_q p[q, k] over the sink rows, those whose mask allows key 0 and at least one
                 other key (causal query 0, which may see only key 0, has no choice), when asked for
    sink_rows    [H] how many sink rows"""
    n_rows: int
    stats: dict[str, torch.Tensor] = field(default_factory=dict)
    key_weight: Optional[torch.Tensor] = None
    sink_rows: Optional[torch.Tensor] = None


def layer_sums(cache, block: str, layer: int, key_punct: Optional[torch.Tensor] = None, same_sequence: bool = True,
               sinks: bool = False, batch: int = 0, step: Optional[int] = None) -> LayerSums:
    """One layer's LayerSums (batch `batch`), reading `step` query rows at a time: the statistics when key_punct
    (bool [K], which keys are punctuation) is given, the sink sums when `sinks`. same_sequence: queries and keys
    are the same positions (self-attention)."""
    mask = cache[hook_name(block, layer, "hook_mask")][batch]                        # (1 or H, Q, K)
    Q, K = mask.shape[-2:]
    step = step or ROWS_AT_ONCE
    out = LayerSums(Q)
    for a in range(0, Q, step):
        b = min(Q, a + step)
        allowed = mask[:, a:b]                                                       # (1 or H, w, K)
        n = key_end(allowed)
        p, scores = pattern_rows(cache, block, layer, (a, b), n, batch=batch, with_scores=True)   # (H, w, n)
        p = p.to(torch.promote_types(p.dtype, torch.float32))
        seen = allowed.sum(-1)                                                       # (1 or H, w) keys each row may see
        if key_punct is not None:
            for k, v in row_stats(p, a, allowed, seen, key_punct[:n], same_sequence and Q == K,
                                  None if scores is None else scores.to(p.dtype)).items():
                out.stats[k] = out.stats.get(k, 0) + v.double().sum(-1)
        if sinks:
            H = p.shape[0]
            use = (allowed[..., 0] & (seen > 1)).expand(H, b - a)                    # (H, w)
            if out.key_weight is None:
                out.key_weight = torch.zeros(H, K, dtype=torch.float64)
                out.sink_rows = torch.zeros(H, dtype=torch.long)
            out.key_weight[:, :n] += (use.to(p.dtype)[:, None, :] @ p).squeeze(1)    # (H, n): Σ over sink rows
            out.sink_rows += use.sum(-1)
    return out


def row_stats(p: torch.Tensor, a: int, allowed: torch.Tensor, seen: torch.Tensor, punct: torch.Tensor,
              same_sequence: bool, scores: Optional[torch.Tensor] = None) -> dict[str, torch.Tensor]:
    """Every STATS quantity of query rows a, a + 1, … (p [H, w, n] over keys 0..n-1, in p's dtype), per row: stat ->
    [H, w] (prev_token: rows q ≥ 1 only; self and prev_token only when same_sequence). allowed bool [1 or H, w, K]
    (K ≥ n), seen = allowed.sum(-1), punct bool [n]; scores: the masked scores p is the softmax of, when known
    (the entropy then needs no logarithm per weight)."""
    H, w, n = p.shape
    b = a + w
    k = torch.arange(n, dtype=p.dtype)
    left, right = k < a, k >= b                                                      # keys before / after the rows
    # Σ_k p·|q − k| without a [w, n] distance per row: for k < a ≤ q, q − k = (q − a) + (a − k); for k ≥ b > q,
    # k − q = (k − b + 1) + (b − 1 − q); every term ≥ 0, so float32 loses nothing to cancellation. One matrix
    # product reads the block once for these sums and the punctuation weight; keys a..b-1 take |q − k| directly.
    cols = torch.stack([punct.to(p.dtype), left.to(p.dtype), (a - k).clamp_min(0) * left,
                        right.to(p.dtype), (k - b + 1).clamp_min(0) * right])       # (5, n)
    c = (cols @ p.reshape(H * w, n).T).view(5, H, w)          # (5, n) @ (n, H·w): 2.6× faster than p @ cols.T
    q = torch.arange(a, b, dtype=p.dtype)
    hi = min(b, n)
    near = (p[..., a:hi] * (q[:, None] - torch.arange(a, hi, dtype=p.dtype)).abs()).sum(-1) if hi > a else 0
    dist = (q - a) * c[1] + c[2] + near + (b - 1 - q) * c[3] + c[4]
    K = allowed.shape[-1]
    last_key = (allowed * torch.arange(1, K + 1)).argmax(-1, keepdim=True).expand(H, w, 1)
    top = p.amax(-1)
    out = {"entropy": row_entropy(p, top, scores),
           "mean_distance": dist,
           "first_token": p[..., 0],
           "last_token": p.gather(-1, last_key.clamp_max(n - 1)).squeeze(-1),
           "punctuation": c[0],
           "max_weight": top,
           "max_entropy": seen.clamp_min(1).double().log().expand(H, w)}
    if same_sequence:
        out["self"] = torch.diagonal(p[:, :, a:], dim1=-2, dim2=-1) if n > a else p.new_zeros(H, 0)
        lo = max(a, 1)                                                               # prev_token: rows q ≥ 1
        out["prev_token"] = p[:, lo - a:, lo - 1:].diagonal(dim1=-2, dim2=-1) if b > lo else p.new_zeros(H, 0)
    return out


def row_entropy(p: torch.Tensor, top: torch.Tensor, scores: Optional[torch.Tensor] = None) -> torch.Tensor:
    """−Σ_k p ln p over the last axis of p [.., n], in p's dtype (top = p.amax(-1)). From the masked scores x that p
    is the softmax of (−inf where forbidden), when given: ln p_k = x_k − M − ln Z, with M the row's largest score and
    Z = Σ exp(x − M) = 1 / max p, so the entropy is ln Z + Σ p·(M − x), two sums of terms ≥ 0 and no logarithm per
    weight (about 2 ns an element on CPU: a fifth of Head statistics at 2,048 pieces). Without scores: −Σ p ln p
    with ln of p ≥ the smallest normal float, in place, so p = 0 adds 0 (xlogy and entr are 2× slower in float32).
    A row that may see no key has p = 0 and entropy 0. The scores are overwritten."""
    if scores is None:
        return -p.clamp_min(torch.finfo(p.dtype).tiny).log_().mul_(p).sum(-1)
    x = scores.sub_(scores.amax(-1, keepdim=True)).mul_(p)     # p·(x − M) ≤ 0 in place; NaN where forbidden (0·−inf)
    return torch.where(top > 0, -x.nansum(-1) - top.log(), 0.0)
