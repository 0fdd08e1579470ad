"""Rotary position embedding (RoPE, Su et al. 2021), as Llama-family models apply it.

Each head's q and k are cut into pairs of dimensions (i, i + d/2) and each pair is rotated by the angle
pos · θ_i, with θ_i = theta^(−2i/d) (the "inverse frequencies"):

    q' = q · cos(pos·θ) + rotate_half(q) · sin(pos·θ),   rotate_half([a, b]) = [−b, a]

so q'·k' depends on the positions only through their offset i − j. The scaling types stretch θ for longer
contexts: linear (θ / factor), dynamic (NTK: a larger base once the sequence outgrows the trained
length), yarn (interpolate low frequencies, keep high ones, scale cos and sin) and llama3 (the same idea
with wavelength bands). The formulas follow the published models' reference code (Hugging Face's
modeling_rope_utils), so imported checkpoints rotate exactly as they were trained.
"""
from __future__ import annotations

import math
from typing import Optional

import torch


def inverse_frequencies(cfg, seq_len: Optional[int] = None) -> tuple[torch.Tensor, float]:
    """(θ [d_head / 2], the factor cos and sin are multiplied by) for cfg's RoPE type, at sequence length
    seq_len (only the dynamic type depends on it)."""
    dim, base, kind, factor = cfg.d_head, float(cfg.rope_theta), cfg.rope_type, float(cfg.rope_factor)
    exponents = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim
    if kind == "dynamic":
        trained = cfg.rope_original_max or cfg.max_len
        n = max(seq_len or trained, trained)
        base = base * ((factor * n / trained) - (factor - 1)) ** (dim / (dim - 2))
    inv = 1.0 / (base ** exponents)
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "llama3":
        return _llama3(inv, cfg), 1.0
    if kind == "yarn":
        return _yarn(cfg, dim, base, factor)
    return inv, 1.0


def _llama3(inv: torch.Tensor, cfg) -> torch.Tensor:
    factor, low, high = float(cfg.rope_factor), float(cfg.rope_low_freq_factor), float(cfg.rope_high_freq_factor)
    trained = cfg.rope_original_max
    low_wavelen, high_wavelen = trained / low, trained / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)               # long waves: divided by factor
    smooth = (trained / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def _yarn(cfg, dim: int, base: float, factor: float) -> tuple[torch.Tensor, float]:
    trained = cfg.rope_original_max
    scale = cfg.rope_attention_factor or (1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(trained / (rotations * 2 * math.pi))) / (2 * math.log(base))

    lo = max(math.floor(correction_dim(cfg.rope_beta_fast)), 0)
    hi = min(math.ceil(correction_dim(cfg.rope_beta_slow)), dim - 1)
    hi = hi + 0.001 if lo == hi else hi
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - lo) / (hi - lo), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    extrapolate = 1 - ramp                                 # 1: keep the trained frequency, 0: interpolate
    inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolate) + (1.0 / pos_freqs) * extrapolate
    return inv, float(scale)


def cos_sin(cfg, offset: int, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [T, d_head] for positions offset .. offset + T − 1 (each frequency twice: [θ, θ])."""
    inv, scale = inverse_frequencies(cfg, offset + T)
    pos = torch.arange(offset, offset + T, dtype=torch.float32)
    freqs = pos[:, None] * inv[None, :]                                       # (T, d/2)
    emb = torch.cat([freqs, freqs], dim=-1)                                   # (T, d)
    return emb.cos() * scale, emb.sin() * scale


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [batch, pos, head, d_head] rotated by position: cos, sin [pos, d_head]."""
    cos, sin = (c[None, :, None, :].to(x.device, x.dtype) for c in (cos, sin))
    return x * cos + rotate_half(x) * sin
