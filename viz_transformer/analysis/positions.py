"""Positional encodings compared: the sinusoidal table's dot products by position and by offset, and
RoPE's rotation angles and why its scores depend only on the offset."""
from __future__ import annotations

import math

import numpy as np
import torch

from viz_transformer.core.rope import cos_sin, rotate


def pe_similarity(pe: torch.Tensor) -> torch.Tensor:
    """[L, d] -> [L, L] dot products between position vectors."""
    pe = pe.double()
    return (pe @ pe.T).float()


def similarity_by_offset(pe: torch.Tensor, anchors: list[int], max_offset: int) -> dict[int, np.ndarray]:
    """For each anchor position p: PE[p]·PE[p+δ] for δ = 0..max_offset (shorter if past the end).
    For the sinusoidal table the curves coincide: the product depends only on δ."""
    pe = pe.double()
    out = {}
    for p in anchors:
        end = min(pe.shape[0], p + max_offset + 1)
        out[p] = (pe[p:end] @ pe[p]).numpy()
    return out


def rope_angles(cfg, n: int) -> torch.Tensor:
    """cos(pos · θ_i) [n, d_head / 2]: how far RoPE turns each pair of dimensions (i, i + d/2) at each position."""
    cos, _ = cos_sin(cfg, 0, n)
    return cos[:, : cfg.d_head // 2]


def rope_offset_scores(cfg, q: torch.Tensor, k: torch.Tensor, i: int, j: int, shifts: int) -> dict[str, torch.Tensor]:
    """One head's own q (a query row) and k (a key row), both before the rotation [d_head], rotated as if they sat at
    positions (i + s, j + s) and at (i + s, j) for s = 0 .. shifts: the scaled scores [shifts + 1] of each.
    "kept" is flat (the score depends only on the offset i − j); "moved" changes with the offset."""
    n = max(i, j) + shifts + 1
    cos, sin = cos_sin(cfg, 0, n)
    qs = rotate(q.float().expand(1, n, 1, -1), cos, sin)[0, :, 0]          # q placed at every position: [n, d]
    ks = rotate(k.float().expand(1, n, 1, -1), cos, sin)[0, :, 0]
    scale = math.sqrt(cfg.d_head)
    s = torch.arange(shifts + 1)
    return {"kept": (qs[i + s] * ks[j + s]).sum(-1) / scale, "moved": (qs[i + s] * ks[j]).sum(-1) / scale}
