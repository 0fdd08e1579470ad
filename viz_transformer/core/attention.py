"""Multi-head attention written out step by step, with a hook point on every intermediate.

No fused kernel: the pre- and post-softmax weights must exist so they can be captured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import nn

from viz_transformer.core.hooks import HookPoint


@dataclass
class AttentionSteps:
    """Scaled dot-product attention with every stage kept. For T queries, S keys, d = d_head:
    q [..., T, d], k / v [..., S, d], qk / scaled / masked / weights [..., T, S], z [..., T, d]."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: Optional[torch.Tensor]
    divisor: float
    qk: torch.Tensor
    scaled: torch.Tensor      # qk / divisor
    masked: torch.Tensor      # -inf where the mask forbids
    weights: torch.Tensor     # softmax over keys; a fully masked row is all zeros
    z: torch.Tensor           # weights @ v (after dropout, in training)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None,
              divisor: Optional[float] = None, hook: Optional[Callable] = None,
              dropout: Optional[Callable] = None) -> AttentionSteps:
    """softmax(q kᵀ / divisor, masked) v: the one implementation the model, the pages and the
    tests all use. mask: bool, broadcastable to [..., T, S], True = may attend. divisor defaults
    to √d_k. hook(stage, tensor) -> tensor lets the model pass "scores", "mask" and "pattern"
    through its hook points (and lets a hook replace them)."""
    divisor = math.sqrt(q.shape[-1]) if divisor is None else float(divisor)
    hook = hook or (lambda stage, x: x)
    qk = q @ k.transpose(-2, -1)                                             # (..., T, S)
    scaled = hook("scores", qk / divisor)
    masked = scaled
    if mask is not None:
        mask = hook("mask", mask)
        masked = scaled.masked_fill(~mask, float("-inf"))
    weights = hook("pattern", torch.softmax(masked, dim=-1).nan_to_num(0.0))
    z = (dropout(weights) if dropout is not None else weights) @ v          # (..., T, d)
    return AttentionSteps(q, k, v, mask, divisor, qk, scaled, masked, weights, z)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.W_Q = nn.Linear(d_model, d_model)
        self.W_K = nn.Linear(d_model, d_model)
        self.W_V = nn.Linear(d_model, d_model)
        self.W_O = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.hook_q = HookPoint()        # [batch, pos, head, d_head]
        self.hook_k = HookPoint()        # [batch, pos, head, d_head]
        self.hook_v = HookPoint()        # [batch, pos, head, d_head]
        self.hook_scores = HookPoint()   # [batch, head, query_pos, key_pos]  scaled, before the mask
        self.hook_mask = HookPoint()     # [batch, 1, query_pos, key_pos]  bool, True = may attend
        self.hook_pattern = HookPoint()  # [batch, head, query_pos, key_pos]  after softmax
        self.hook_z = HookPoint()        # [batch, query_pos, head, d_head]
        self.hook_out = HookPoint()      # [batch, query_pos, d_model]

    def split(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head)                      # (B, T, nh, hs)

    def project_kv(self, x_kv: torch.Tensor):
        """K and V for the key/value input, hooked, as [batch, pos, head, d_head]."""
        return self.hook_k(self.split(self.W_K(x_kv))), self.hook_v(self.split(self.W_V(x_kv)))

    def forward(self, x_q: torch.Tensor, x_kv: Optional[torch.Tensor], mask: torch.Tensor,
                kv: Optional[tuple] = None, past: Optional[tuple] = None):
        """x_q: [B, q, d]; x_kv: [B, k, d] (None when `kv` is given, for cached cross-attention).

        kv: precomputed (K, V) [B, k, nh, hs] used instead of projecting x_kv.
        past: (K, V) of earlier positions, concatenated in front of the new ones (KV cache).
        Returns (output [B, q, d], (K, V) [B, k_total, nh, hs]) so callers can cache them.
        """
        q = self.hook_q(self.split(self.W_Q(x_q)))                          # (B, q, nh, hs)
        if kv is None:
            k, v = self.project_kv(x_kv)                                     # (B, k, nh, hs)
        else:
            k, v = kv
        if past is not None:
            k, v = torch.cat([past[0], k], dim=1), torch.cat([past[1], v], dim=1)
        qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))                 # (B, nh, T, hs)
        B, Tq, Tk = qh.shape[0], qh.shape[2], kh.shape[2]
        points = {"scores": self.hook_scores,      # (B, nh, q, k)
                  "mask": self.hook_mask,          # (B, 1, q, k)
                  "pattern": self.hook_pattern}    # (B, nh, q, k)
        steps = attention(qh, kh, vh, mask.expand(B, 1, Tq, Tk),
                          hook=lambda stage, x: points[stage](x), dropout=self.drop)
        z = self.hook_z(steps.z.transpose(1, 2))                              # (B, q, nh, hs)
        out = self.hook_out(self.W_O(z.reshape(B, Tq, -1)))                  # (B, q, d)
        return out, (k, v)
