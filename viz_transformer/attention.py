"""Multi-head attention written out step by step, with a hook point on every intermediate.

No fused kernel: the pre- and post-softmax weights must exist so they can be captured.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .hooks import HookPoint


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              mask: Optional[torch.Tensor] = None, scale: Optional[float] = None):
    """Plain scaled dot-product attention. q: [..., q, d], k/v: [..., k, d], mask True = keep.

    Returns (output [..., q, d], weights [..., q, k]). Fully masked rows get all-zero weights.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


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
        scores = self.hook_scores(qh @ kh.transpose(-2, -1) / math.sqrt(self.d_head))  # (B, nh, q, k)
        B, _, Tq, Tk = scores.shape
        mask = self.hook_mask(mask.expand(B, 1, Tq, Tk))                     # (B, 1, q, k)
        scores = scores.masked_fill(~mask, float("-inf"))
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1).nan_to_num(0.0))
        z = self.hook_z((self.drop(pattern) @ vh).transpose(1, 2))          # (B, q, nh, hs)
        out = self.hook_out(self.W_O(z.reshape(B, Tq, -1)))                  # (B, q, d)
        return out, (k, v)
