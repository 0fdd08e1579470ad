"""A KV cache's keys and values grown in place, step by step, instead of copied whole at every step.

torch.cat([past, new], dim=1) copies every cached position at every decoding step: O(T^2) over a decode, a
seventh of a small model's step at 200 positions. extend() gives the same tensor as that cat, written into room
left after `past` in a buffer it made, when `past` is exactly the part of that buffer in use and no one has
written after it (another continuation from the same cache, a step that failed halfway): otherwise it copies,
as cat does, into a new buffer with room for as many positions again. A tensor that autograd tracks is never
written into.
"""
from __future__ import annotations

import torch

_USED = "_kv_used"          # on a buffer extend() made: how many positions of it are in use


def extend(past: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """torch.cat([past, new], dim=1), as a view of a buffer with room to grow (past, new: [B, T, ...])."""
    n, m = past.shape[1], new.shape[1]
    tracked = torch.is_grad_enabled() and (past.requires_grad or new.requires_grad)
    if tracked or new.dtype != past.dtype or new.device != past.device or past.shape[2:] != new.shape[2:]:
        return torch.cat([past, new], dim=1)
    base = past._base
    if (base is not None and getattr(base, _USED, None) == n and base.shape[1] >= n + m
            and past.data_ptr() == base.data_ptr() and past.stride() == base.stride()):
        base[:, n:n + m] = new
        setattr(base, _USED, n + m)
        return base[:, :n + m]
    buf = past.new_empty((past.shape[0], 2 * (n + m), *past.shape[2:]))
    buf[:, :n], buf[:, n:n + m] = past, new
    setattr(buf, _USED, n + m)
    return buf[:, :n + m]
