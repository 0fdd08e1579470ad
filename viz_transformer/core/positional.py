"""Positional encodings: the fixed sinusoidal table and a learned table, same interface.

PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
"sinusoidal_halves" holds the same numbers in another order, as Marian (Hugging Face) lays them out: every
sine first, then every cosine (PE(pos, i) = sin(pos / 10000^(2i/d)) for i < d/2, cos(...) after).
"""
from __future__ import annotations

import math

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


class PositionalEncoding(nn.Module):
    """Returns the [T, d_model] rows for positions offset .. offset+T-1."""

    def __init__(self, kind: str, max_len: int, d_model: int):
        super().__init__()
        self.kind, self.max_len = kind, max_len
        if kind in ("sinusoidal", "sinusoidal_halves"):
            table = sinusoidal_table if kind == "sinusoidal" else sinusoidal_halves_table
            self.register_buffer("table", table(max_len, d_model), persistent=False)
        else:
            # randn × 0.02, the same numbers; written as normal_ so a meta-device build can skip it
            self.weight = nn.Parameter(torch.empty(max_len, d_model).normal_(0.0, 0.02))

    def matrix(self) -> torch.Tensor:
        return self.weight if self.kind == "learned" else self.table

    def forward(self, T: int, offset: int = 0) -> torch.Tensor:
        if offset + T > self.max_len:
            raise ValueError(f"sequence of {offset + T} positions exceeds max_len {self.max_len}")
        return self.matrix()[offset: offset + T]
