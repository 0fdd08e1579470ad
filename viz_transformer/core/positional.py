"""Positional encodings: the fixed sinusoidal table and a learned table, same interface; T5's relative position bias.

PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
"sinusoidal_halves" holds the same numbers in another order, as Marian (Hugging Face) lays them out: every
sine first, then every cosine (PE(pos, i) = sin(pos / 10000^(2i/d)) for i < d/2, cos(...) after).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """[max_len, d_model] sinusoidal positional-encoding matrix, on the CPU even inside a meta-device
    context (the model checks a checkpoint's shapes on meta, where arange would import torch._dynamo)."""
    pos = torch.arange(max_len, dtype=torch.float64, device="cpu").unsqueeze(1)   # (L, 1)
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64, device="cpu")           # 2i
    inv_freq = torch.exp(-math.log(10000.0) * i2 / d_model)                  # 1 / 10000^(2i/d)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64, device="cpu")
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq[: d_model // 2])
    return pe.float()


def sinusoidal_halves_table(max_len: int, d_model: int) -> torch.Tensor:
    """The sinusoidal table with the sines in the first half of each row and the cosines in the second."""
    pe = sinusoidal_table(max_len, d_model)
    return torch.cat([pe[:, 0::2], pe[:, 1::2]], dim=1)


def sinusoidal_fairseq_table(max_len: int, d_model: int) -> torch.Tensor:
    """fairseq's table (M2M100SinusoidalPositionalEmbedding.get_embedding): row p is sin(p·f_i) for i < d/2, then
    cos(p·f_i), f_i = 10000^(-i/(d/2 - 1)); an odd d_model gets a zero last column. Computed in float32 as
    transformers computes it (its rounding is the reference's)."""
    half = d_model // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float32, device="cpu") * -(math.log(10000) / (half - 1)))
    angle = torch.arange(max_len, dtype=torch.float32, device="cpu").unsqueeze(1) * freq.unsqueeze(0)   # (L, d/2)
    pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    return torch.cat([pe, torch.zeros(max_len, 1, device="cpu")], dim=1) if d_model % 2 else pe


TABLES = {"sinusoidal": sinusoidal_table, "sinusoidal_halves": sinusoidal_halves_table,
          "sinusoidal_fairseq": sinusoidal_fairseq_table}


class PositionalEncoding(nn.Module):
    """Returns the [T, d_model] rows for positions offset .. offset+T-1."""

    def __init__(self, kind: str, max_len: int, d_model: int):
        super().__init__()
        self.kind, self.max_len = kind, max_len
        if kind in TABLES:
            self.register_buffer("table", TABLES[kind](max_len, d_model), persistent=False)
        else:
            # randn × 0.02, the same numbers; written as normal_ so a meta-device build can skip it
            self.weight = nn.Parameter(torch.empty(max_len, d_model).normal_(0.0, 0.02))

    def matrix(self) -> torch.Tensor:
        return self.weight if self.kind == "learned" else self.table

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        if offset + T > self.max_len:
            raise ValueError(f"sequence of {offset + T} positions exceeds max_len {self.max_len}")
        return self.matrix()[offset: offset + T]


# -- T5's relative position bias ----------------------------------------------------------------------
RELATIVE_DIVISOR = 1.0     # T5 does not divide q·k by √d_head: its learned bias was trained on unscaled scores


def relative_bucket(offset: torch.Tensor, bidirectional: bool, n_buckets: int = 32, max_distance: int = 128):
    """T5's bucket of each key-minus-query offset: half the buckets (each direction's, when bidirectional) hold
    the offsets 0 .. n/2-1 exactly, the rest cover n/2 .. max_distance in logarithmically wider steps, and
    everything beyond max_distance shares the last bucket. Causal (not bidirectional): offsets > 0 (the future)
    fall in bucket 0 with offset 0. offset: int tensor; returns the same shape, values in [0, n_buckets)."""
    bucket = torch.zeros_like(offset)
    if bidirectional:
        n_buckets //= 2
        bucket = bucket + (offset > 0).long() * n_buckets
        dist = offset.abs()
    else:
        dist = -torch.clamp(offset, max=0)
    exact = n_buckets // 2
    far = exact + (torch.log(dist.float() / exact) / math.log(max_distance / exact)
                   * (n_buckets - exact)).long()
    far = torch.clamp(far, max=n_buckets - 1)
    return bucket + torch.where(dist < exact, dist, far)


class RelativeBias(nn.Module):
    """A learned scalar per (offset bucket, head), added to every head's scores: [1, head, q, k] for queries at
    positions offset .. offset+q-1 against keys 0 .. k-1. Built in layer 0 of a stack; every layer of it adds
    the same bias (T5's relative_attention_bias)."""

    def __init__(self, n_buckets: int, max_distance: int, n_heads: int, bidirectional: bool):
        super().__init__()
        self.n_buckets, self.max_distance, self.bidirectional = n_buckets, max_distance, bidirectional
        self.weight = nn.Parameter(torch.empty(n_buckets, n_heads).normal_(0.0, 0.02))     # (bucket, head)

    def buckets(self, n_q: int, n_k: int, offset: int = 0) -> torch.Tensor:
        """[q, k] bucket of each (query, key) pair."""
        q = torch.arange(offset, offset + n_q, device=self.weight.device)[:, None]
        k = torch.arange(n_k, device=self.weight.device)[None, :]
        return relative_bucket(k - q, self.bidirectional, self.n_buckets, self.max_distance)

    def forward(self, n_q: int, n_k: int, offset: int = 0) -> torch.Tensor:
        return self.weight[self.buckets(n_q, n_k, offset)].permute(2, 0, 1).unsqueeze(0)     # (1, nh, q, k)

    @torch.no_grad()
    def by_offset(self, max_offset: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(offsets [n], bias [head, n], bucket [n]) at key-minus-query offsets -max .. max (causal: -max .. 0): the
        bias each head adds and the bucket each offset falls in, for a chart of bias against offset (CPU, float32)."""
        hi = max_offset if self.bidirectional else 0
        offsets = torch.arange(-max_offset, hi + 1, device=self.weight.device)
        b = relative_bucket(offsets, self.bidirectional, self.n_buckets, self.max_distance)
        return offsets.cpu(), self.weight[b].t().float().cpu(), b.cpu()            # (n), (nh, n), (n)


def bias_capture(prefix: str) -> Optional[str]:
    """The capture holding the position bias the block `prefix` ("decoder.3.self_attn") adds: its stack's layer 0
    ("decoder.0.self_attn.hook_bias"); None for cross-attention (which adds none)."""
    part, _, attn = prefix.split(".")
    return None if attn != "self_attn" else f"{part}.0.self_attn.hook_bias"


def position_terms(tensors, prefix: str, head: Optional[int] = None):
    """(divisor, bias) of the block `prefix` as the model used them. A T5 run holds its stacks' relative position
    bias (layer 0's capture: bias_capture): its scores are not divided (divisor 1) and self-attention adds that bias
    [1, head, q, k] (one head's [q, k] when `head` is given), cross-attention none. Else (None, None): √d_head."""
    part = prefix.split(".")[0]
    if f"{part}.0.self_attn.hook_bias" not in tensors:
        return None, None
    name = bias_capture(prefix)
    bias = tensors[name] if name is not None else None
    return RELATIVE_DIVISOR, bias if bias is None or head is None else bias[0, head]
