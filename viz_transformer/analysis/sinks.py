"""Attention sinks: how much of each head's attention lands on the first position, and a pattern with that
position taken out so the rest can be seen. Maths on a captured run's hook_pattern and hook_mask, no model run.

Many heads of trained Transformers (LLMs above all) park most of their attention on the first token when
they have nothing better to do (Xiao et al. 2023, "Efficient Streaming Language Models with Attention Sinks").
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd
import torch

from viz_transformer.analysis import head_sums
from viz_transformer.core.hook_names import available_blocks, hook_name, n_layers as block_layers

COLUMNS = ["block", "layer", "head", "first_share", "top_other", "top_other_share", "n_rows"]


def sink_shares(cache, block: str, n_layers: int, batch: int = 0, step: Optional[int] = None,
                layers: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """One row per head of one attention block kind ("decoder.self_attn"), for each of `layers` (default: all
    n_layers): block, layer, head and

        first_share      the mean over query rows of p[q, 0], the weight on the first key position
        top_other        the key position other than 0 with the largest mean weight over the same rows
        top_other_share  that mean weight
        n_rows           how many query rows the means are over

    The rows are those whose mask (the captured hook_mask) allows the first position and at least one other:
    in causal self-attention query 0 may see only itself, so its weight 1 on position 0 is no choice and is
    left out; an encoder's query 0 may see every position and counts. Every share is over the same rows, so
    first_share + the shares of all other positions = 1, and "head 3.5 puts 82% on position 0" means 82% of
    all the attention those rows give. NaN (and top_other −1) when no row qualifies (a one-piece text).
    The pattern is read `step` query rows at a time (head_sums.layer_sums)."""
    rows = []
    for layer in range(n_layers) if layers is None else layers:
        rows += share_rows(block, layer, head_sums.layer_sums(cache, block, layer, sinks=True, batch=batch, step=step))
    return pd.DataFrame(rows, columns=COLUMNS)


def share_rows(block: str, layer: int, sums) -> list[dict]:
    """sink_shares' rows of one layer from its head_sums.LayerSums (key_weight and sink_rows)."""
    n, K = sums.sink_rows, sums.key_weight.shape[1]
    share = sums.key_weight / n[:, None].clamp_min(1)                                # (H, K)
    share[n == 0] = float("nan")
    rows = []
    for h in range(share.shape[0]):
        top = int(share[h, 1:].argmax()) + 1 if K > 1 and n[h] > 0 else -1
        rows.append({"block": block, "layer": layer, "head": h, "first_share": float(share[h, 0]),
                     "top_other": top, "top_other_share": float(share[h, top]) if top > 0 else float("nan"),
                     "n_rows": int(n[h])})
    return rows


def run_sink_shares(run, cfg) -> pd.DataFrame:
    """sink_shares of every attention block of a captured Run, one table."""
    return pd.concat([sink_shares(run.cache, b, block_layers(cfg, b)) for b in available_blocks(cfg)],
                     ignore_index=True)


def strongest(df: pd.DataFrame) -> Optional[pd.Series]:
    """The row of the head with the largest first_share, or None when no head has one."""
    shares = df["first_share"].astype(float)
    return None if shares.isna().all() else df.loc[shares.idxmax()]


def share_of(df: pd.DataFrame, layer: int, head) -> float:
    """first_share of one head of a sink_shares table, or for head "mean"/"max" (the attention page's
    reductions) the mean over that layer's heads (NaN when none has one)."""
    rows = df[df["layer"] == layer]
    if isinstance(head, int):
        rows = rows[rows["head"] == head]
    return float(rows["first_share"].mean()) if len(rows) else float("nan")


def without_sink(pattern, sinks: Sequence[int]):
    """A pattern [..., q, k] with the key columns in `sinks` set to 0 and every row renormalised over the
    rest: w'[q, k] = w[q, k] / (1 − Σ_s w[q, s]) for k not a sink. A row whose whole weight was on the sinks
    (causal query 0 with sink 0) stays 0. Returns the same kind (torch tensor or numpy array) and dtype.

    This is NOT the model's attention: the model did give the sinks their weight, and its output mixes the
    sinks' values in by it. It is a magnifying glass, so the small weights the sink drowns out become
    visible on a 0..1 scale; say so wherever it is shown."""
    was_numpy = isinstance(pattern, np.ndarray)
    p = torch.as_tensor(pattern)
    K = p.shape[-1]
    cols = sorted(set(int(s) for s in sinks))
    if any(not 0 <= s < K for s in cols):
        raise ValueError(f"sink positions must be in 0..{K - 1} (the pattern has {K} keys), got {list(sinks)}")
    out = p.double().clone()
    out[..., cols] = 0.0
    rest = out.sum(-1, keepdim=True)
    out = torch.where(rest > 0, out / torch.where(rest > 0, rest, 1.0), torch.zeros_like(out))
    out = out.to(p.dtype)
    return out.numpy() if was_numpy else out


def without_tokens(pattern, positions: Sequence[int]):
    """A self-attention pattern [..., T, T] without the tokens at `positions` (BERT's [CLS] and [SEP]): their
    key columns set to 0 and every row renormalised (without_sink), then their query rows and key columns
    dropped, [..., T', T'] with T' = T − len(positions). Like without_sink, NOT the model's attention: say so
    wherever it is shown."""
    T = pattern.shape[-1]
    gone = set(int(p) for p in positions)
    keep = [i for i in range(T) if i not in gone]
    out = without_sink(pattern, sorted(gone)) if gone else pattern
    return out[..., keep, :][..., keep]


def key_shares(cache, block: str, n_layers: int, positions: Sequence[int], batch: int = 0) -> torch.Tensor:
    """[layer, head]: each head's mean, over the query rows its mask lets see at least one key, of its total
    weight on the key `positions` (BERT's [SEP]s: Clark et al. 2019, "What Does BERT Look At?")."""
    rows = []
    for layer in range(n_layers):
        p = cache[hook_name(block, layer, "hook_pattern")][batch].double()           # (H, Q, K)
        use = cache[hook_name(block, layer, "hook_mask")][batch].expand_as(p).any(-1)   # (H, Q)
        on = p[..., list(positions)].sum(-1) if len(positions) else torch.zeros_like(use, dtype=p.dtype)
        rows.append((on * use).sum(-1) / use.sum(-1).clamp_min(1))                  # (H,)
    return torch.stack(rows).float() if rows else torch.empty(0, 0)

