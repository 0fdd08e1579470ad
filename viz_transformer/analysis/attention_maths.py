"""One head's attention taken apart, for the step-by-step page and the lessons' claims: every stage kept
(the model's own attention function), PyTorch's scaled_dot_product_attention as an independent check, the
entropy of a row, and why the scores are divided by √d_k."""
from __future__ import annotations

import math
from typing import Optional

import torch

from viz_transformer.core.attention import AttentionSteps, attention


def snap_divisor(value: float, d_head: int, tolerance: float = 0.03) -> float:
    """A slider value near √d_k is √d_k exactly (a slider cannot hold an irrational default)."""
    sqrt_dk = math.sqrt(d_head)
    return sqrt_dk if abs(value - sqrt_dk) < tolerance else float(value)


def attention_steps(q, k, v, mask=None, divisor: Optional[float] = None, bias=None) -> AttentionSteps:
    """softmax((q kᵀ) / divisor + bias + mask) v for one head with every stage kept; divisor defaults to
    √d_k; bias: T5's relative position bias [q, k] (none elsewhere). The model's own attention function, so at the
    model's divisor and bias it reproduces the captured pattern."""
    return attention(q, k, v, mask, divisor, bias=bias)


def sdpa_reference(q, k, v, mask=None, divisor: Optional[float] = None, bias=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [T, S], z [T, d]) of one head from PyTorch's torch.nn.functional.scaled_dot_product_attention,
    an implementation independent of attention.attention, on the same q, k, v and mask: the weights are its
    output on an identity V (softmax(...) · I), z its output on v. divisor None: SDPA's own default scale,
    1/√d_k. bias [q, k]: added to the scaled scores (SDPA's float attn_mask, the mask's -inf in it). A fully masked
    row is all zeros, as in attention.attention (older PyTorch gives NaN there)."""
    scale = None if divisor is None else 1.0 / float(divisor)
    if bias is not None:
        mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    eye = torch.eye(k.shape[-2], dtype=v.dtype, device=v.device)
    weights, z = (sdpa(q, k, x, attn_mask=mask, scale=scale).nan_to_num(0.0) for x in (eye, v))
    return weights, z


def sdpa_difference(steps: AttentionSteps, q, k, v, mask=None, divisor: Optional[float] = None,
                    bias=None) -> tuple[float, float]:
    """max |difference| between step-by-step attention (`steps`, from attention_steps) and sdpa_reference on
    the q, k, v, mask and divisor given here (not those `steps` recorded): (of the weights, of z)."""
    weights, z = sdpa_reference(q, k, v, mask, divisor, bias)
    return float((steps.weights - weights).abs().max()), float((steps.z - z).abs().max())


def entropy(weights) -> float:
    """Shannon entropy (nats) of one row of weights: 0 for one-hot, log(n) for uniform."""
    w = torch.as_tensor(weights, dtype=torch.float64)
    w = w[w > 0]
    return float(-(w * w.log()).sum())


def uniform_entropy(mask_row) -> float:
    """The entropy of a row spread evenly over the keys it may use: ln(allowed keys) of one mask row
    [S] (True = may attend); masked keys get weight 0 and do not count."""
    return math.log(max(int(torch.as_tensor(mask_row).bool().sum()), 1))


def qk_variance(d_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), n_samples: int = 4000, seed: int = 0) -> dict:
    """Empirical variance of q·k for q, k with independent N(0, 1) entries: it grows like d_k,
    and dividing by √d_k brings it back to 1 (why the scale keeps softmax out of saturation)."""
    g = torch.Generator().manual_seed(seed)
    raw, scaled = [], []
    for d in d_ks:
        q, k = torch.randn(n_samples, d, generator=g), torch.randn(n_samples, d, generator=g)
        dots = (q * k).sum(-1).double()
        raw.append(float(dots.var()))
        scaled.append(float((dots / math.sqrt(d)).var()))
    return {"d_k": list(d_ks), "raw": raw, "scaled": scaled}
