"""Attention masks as small named functions. Convention: bool, True = may attend.

Shapes: every function returns something that broadcasts to [batch, 1, q, k].
"""
from __future__ import annotations

import torch


def causal_mask(T: int, device=None) -> torch.Tensor:
    """[1, 1, T, T]: query i may attend to keys j <= i."""
    return torch.tril(torch.ones(T, T, dtype=torch.bool, device=device)).view(1, 1, T, T)


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """[B, 1, 1, K]: True where the key is a real token, False where it is padding."""
    return (ids != pad_id)[:, None, None, :]


def prefix_lm_mask(T: int, prefix_len, device=None) -> torch.Tensor:
    """[B or 1, 1, T, T]: bidirectional inside the first prefix_len positions, causal after.

    prefix_len is an int or a [B] tensor (one prefix length per sequence).
    """
    causal = causal_mask(T, device)                                          # (1, 1, T, T)
    pl = torch.as_tensor(prefix_len, device=device).reshape(-1, 1, 1, 1)    # (B, 1, 1, 1)
    idx = torch.arange(T, device=device)
    in_prefix_q = idx.view(1, 1, T, 1) < pl
    in_prefix_k = idx.view(1, 1, 1, T) < pl
    return causal | (in_prefix_q & in_prefix_k)


def combine(*masks: torch.Tensor) -> torch.Tensor:
    """Logical AND of broadcastable masks (a position must be allowed by all)."""
    out = masks[0]
    for m in masks[1:]:
        out = out & m
    return out


def sliding_window_mask(T: int, window: int, device=None) -> torch.Tensor:
    """[1, 1, T, T]: query i sees keys i - window + 1 .. i and later ones (combine with causal)."""
    i = torch.arange(T, device=device)
    return (i[:, None] - i[None, :] < window).view(1, 1, T, T)


def self_attention_mask(ids: torch.Tensor, pad_id: int, architecture: str, *, causal: bool,
                        prefix_len=None, window: int = 0) -> torch.Tensor:
    """[B, 1, T, T] mask for self-attention over `ids` (padding combined with causal/prefix, and with a
    sliding window of `window` keys when it is > 0)."""
    B, T = ids.shape
    pad = padding_mask(ids, pad_id)
    if not causal:
        m = pad
    elif architecture == "prefix_lm" and prefix_len is not None:
        m = combine(pad, prefix_lm_mask(T, prefix_len, ids.device))
    else:
        m = combine(pad, causal_mask(T, ids.device))
    if window > 0:
        m = combine(m, sliding_window_mask(T, window, ids.device))
    return m.expand(B, 1, T, T)
