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
from viz_transformer.core.rope import cos_sin, rotate


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
    scaled: torch.Tensor      # qk / divisor (+ bias)
    masked: torch.Tensor      # -inf where the mask forbids
    weights: torch.Tensor     # softmax over keys; a fully masked row is all zeros
    z: torch.Tensor           # weights @ v (after dropout, in training)
    bias: Optional[torch.Tensor] = None   # added to the scaled scores, broadcastable to [..., T, S] (T5's position bias)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None,
              divisor: Optional[float] = None, hook: Optional[Callable] = None,
              dropout: Optional[Callable] = None, bias: Optional[torch.Tensor] = None) -> AttentionSteps:
    """softmax(q kᵀ / divisor + bias, masked) v: the one implementation the model, the pages and the
    tests all use. mask: bool, broadcastable to [..., T, S], True = may attend. divisor defaults
    to √d_k. bias: added to the scaled scores, broadcastable to [..., T, S] (T5's relative position bias).
    hook(stage, tensor) -> tensor lets the model pass "scores", "mask" and "pattern"
    through its hook points (and lets a hook replace them)."""
    divisor = math.sqrt(q.shape[-1]) if divisor is None else float(divisor)
    hook = hook or (lambda stage, x: x)
    qk = q @ k.transpose(-2, -1)                                             # (..., T, S)
    scaled = hook("scores", qk / divisor if bias is None else qk / divisor + bias)
    masked = scaled
    if mask is not None:
        mask = hook("mask", mask)
        masked = torch.where(mask, scaled, float("-inf"))      # masked_fill(~mask, -inf), 2.3x faster on CPU
    weights = hook("pattern", torch.softmax(masked, dim=-1).nan_to_num(0.0))
    z = (dropout(weights) if dropout is not None else weights) @ v          # (..., T, d)
    return AttentionSteps(q, k, v, mask, divisor, qk, scaled, masked, weights, z, bias)


def attention_weights(q: torch.Tensor, k: torch.Tensor, mask: Optional[torch.Tensor] = None,
                      divisor: Optional[float] = None, bias: Optional[torch.Tensor] = None, with_scores: bool = False):
    """attention(q, k, v, mask, divisor, bias=bias).weights, bit for bit, without v and without keeping the
    stages: the same operations in the same order, each after the first done in place on one tensor (a pattern
    read back from the captured q and k makes one [..., T, S] tensor instead of five); the mask fills −inf only
    where some row forbids (forbid_), the values attention()'s torch.where gives. with_scores: (weights, the masked
    scores the softmax read, i.e. attention().masked)."""
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    return weights_from_qk(q @ k.transpose(-2, -1), mask, divisor, bias, with_scores)


def weights_from_qk(x: torch.Tensor, mask: Optional[torch.Tensor], divisor: float,
                    bias: Optional[torch.Tensor] = None, with_scores: bool = False):
    """attention_weights from q·kᵀ [..., T, S] already computed (x is overwritten): divided by `divisor`, the bias
    added, the mask applied, the softmax."""
    others = [t.shape for t in (bias, mask) if t is not None]
    if any(len(o) > x.dim() or any(a not in (b, 1) for a, b in zip(o[::-1], x.shape[::-1])) for o in others):
        x = x.expand(torch.broadcast_shapes(x.shape, *others)).clone()     # a larger mask or bias: the full shape
    x.div_(float(divisor))
    if bias is not None:
        x.add_(bias)
    if mask is not None:
        forbid_(x, mask)
    weights = torch.softmax(x, dim=-1).nan_to_num_(0.0)
    return (weights, x) if with_scores else weights


def forbid_(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x.masked_fill_(~mask, -inf), touching only the key columns that some row's mask forbids: a block of causal
    rows a..b-1 forbids keys a+1..b-1 alone, and masked_fill_ costs about 2 ns an element on CPU (Head
    statistics at 2,048 pieces: 1.7 of its 15.5 CPU s on the whole row width)."""
    forbid = ~mask
    if forbid.shape[-1] != x.shape[-1]:                        # a mask broadcast along the keys
        return x.masked_fill_(forbid, float("-inf"))
    cols = forbid.reshape(-1, forbid.shape[-1]).any(0).nonzero()
    if len(cols):
        lo, hi = int(cols[0]), int(cols[-1]) + 1
        x[..., lo:hi].masked_fill_(forbid[..., lo:hi], float("-inf"))
    return x


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Grouped-query attention: [batch, kv_head, pos, d] -> [batch, kv_head · n_rep, pos, d], each key/value
    head shared by n_rep consecutive query heads (query head h reads key/value head h // n_rep)."""
    if n_rep == 1:
        return x
    B, H, T, D = x.shape
    return x[:, :, None].expand(B, H, n_rep, T, D).reshape(B, H * n_rep, T, D)


class MultiHeadAttention(nn.Module):
    """Q, K, V projections, optional RoPE, scaled dot-product attention (`attention`), output projection.

    n_kv_heads < n_heads: grouped-query attention (K and V have n_kv_heads heads, each read by
    n_heads / n_kv_heads query heads). d_head defaults to d_model / n_heads. qk_norm: a norm module
    factory applied to each head's q and k (before the rotation). rope: a ModelConfig whose RoPE rotates
    q and k by position (hook_q / hook_k before, hook_rot_q / hook_rot_k after). divisor: what q·k is divided
    by (None: √d_head; T5: 1). rel_bias: a RelativeBias built here (layer 0 of a T5 stack) whose bias every
    layer of the stack adds (position_bias; hook_bias)."""

    def __init__(self, *, d_model: int, n_heads: int, dropout: float, n_kv_heads: int = 0, d_head: int = 0,
                 qkv_bias: bool = True, out_bias: bool = True, qk_norm: Optional[Callable] = None, rope=None,
                 divisor: Optional[float] = None, rel_bias: Optional[nn.Module] = None):
        super().__init__()
        self.divisor = divisor
        self.n_heads, self.d_head = n_heads, d_head or d_model // n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        inner, kv_inner = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        self.W_Q = nn.Linear(d_model, inner, bias=qkv_bias)
        self.W_K = nn.Linear(d_model, kv_inner, bias=qkv_bias)
        self.W_V = nn.Linear(d_model, kv_inner, bias=qkv_bias)
        self.W_O = nn.Linear(inner, d_model, bias=out_bias)
        self.drop = nn.Dropout(dropout)
        if qk_norm is not None:
            self.q_norm, self.k_norm = qk_norm(self.d_head), qk_norm(self.d_head)
        self.rope = rope
        if rel_bias is not None:
            self.rel_bias = rel_bias
            self.hook_bias = HookPoint()  # [1, head, query_pos, key_pos]  the position bias every layer adds
        self.hook_q = HookPoint()        # [batch, pos, head, d_head]
        self.hook_k = HookPoint()        # [batch, pos, kv_head, d_head]  (kv_head = head unless grouped-query)
        self.hook_v = HookPoint()        # [batch, pos, kv_head, d_head]
        if rope is not None:
            self.hook_rot_q = HookPoint()    # [batch, pos, head, d_head]  q after the rotation
            self.hook_rot_k = HookPoint()    # [batch, pos, kv_head, d_head]  k after the rotation
        self.hook_scores = HookPoint()   # [batch, head, query_pos, key_pos]  scaled, before the mask
        self.hook_mask = HookPoint()     # [batch, 1, query_pos, key_pos]  bool, True = may attend
        self.hook_pattern = HookPoint()  # [batch, head, query_pos, key_pos]  after softmax
        self.hook_z = HookPoint()        # [batch, query_pos, head, d_head]
        self.hook_out = HookPoint()      # [batch, query_pos, d_model]

    def split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        B, T, _ = x.shape
        return x.view(B, T, heads, self.d_head)                             # (B, T, nh, hs)

    def project_kv(self, x_kv: torch.Tensor, offset: int = 0):
        """K and V for the key/value input, hooked, as [batch, pos, kv_head, d_head] (K rotated, with RoPE)."""
        k = self.split(self.W_K(x_kv), self.n_kv_heads)
        if hasattr(self, "k_norm"):
            k = self.k_norm(k)
        k = self.hook_k(k)
        if self.rope is not None:
            k = self.hook_rot_k(rotate(k, *cos_sin(self.rope, offset, k.shape[1])))
        return k, self.hook_v(self.split(self.W_V(x_kv), self.n_kv_heads))

    def position_bias(self, n_q: int, n_k: int, offset: int = 0) -> torch.Tensor:
        """[1, head, n_q, n_k]: the relative position bias for queries at offset .. offset+n_q-1 against keys
        0 .. n_k-1, hooked (a module built with rel_bias only)."""
        return self.hook_bias(self.rel_bias(n_q, n_k, offset))

    def forward(self, x_q: torch.Tensor, x_kv: Optional[torch.Tensor], mask: torch.Tensor,
                kv: Optional[tuple] = None, past: Optional[tuple] = None, offset: int = 0,
                bias: Optional[torch.Tensor] = None):
        """x_q: [B, q, d]; x_kv: [B, k, d] (None when `kv` is given, for cached cross-attention).

        kv: precomputed (K, V) [B, k, nkv, hs] used instead of projecting x_kv.
        past: (K, V) of earlier positions, concatenated in front of the new ones (KV cache).
        offset: the position of the first query (RoPE; incremental decoding).
        bias: [1, nh, q, k_total] added to the scores (T5's position bias, from layer 0's position_bias).
        Returns (output [B, q, d], (K, V) [B, k_total, nkv, hs]) so callers can cache them.
        """
        q = self.split(self.W_Q(x_q), self.n_heads)                         # (B, q, nh, hs)
        if hasattr(self, "q_norm"):
            q = self.q_norm(q)
        q = self.hook_q(q)
        if self.rope is not None:
            q = self.hook_rot_q(rotate(q, *cos_sin(self.rope, offset, q.shape[1])))
        if kv is None:
            k, v = self.project_kv(x_kv, offset)                             # (B, k, nkv, hs)
        else:
            k, v = kv
        if past is not None:
            k, v = torch.cat([past[0], k], dim=1), torch.cat([past[1], v], dim=1)
        n_rep = self.n_heads // self.n_kv_heads
        qh = q.transpose(1, 2)                                               # (B, nh, T, hs)
        kh, vh = (repeat_kv(t.transpose(1, 2), n_rep) for t in (k, v))
        B, Tq, Tk = qh.shape[0], qh.shape[2], kh.shape[2]
        points = {"scores": self.hook_scores,      # (B, nh, q, k)
                  "mask": self.hook_mask,          # (B, 1, q, k)
                  "pattern": self.hook_pattern}    # (B, nh, q, k)
        steps = attention(qh, kh, vh, mask.expand(B, 1, Tq, Tk), self.divisor,
                          hook=lambda stage, x: points[stage](x), dropout=self.drop, bias=bias)
        z = self.hook_z(steps.z.transpose(1, 2))                              # (B, q, nh, hs)
        out = self.hook_out(self.W_O(z.reshape(B, Tq, -1)))                  # (B, q, d)
        return out, (k, v)
