"""Hugging Face's RoPE settings (rope_parameters, or the older rope_theta + rope_scaling) as our config's rope_*
fields, and the longest sequence such a model runs (hf_import's Llama family)."""
from __future__ import annotations

import math

from viz_transformer.core.checkpoint_files import CheckpointError
from viz_transformer.core.config import LIMITS, ROPE_TYPES


def _get(raw: dict, *names, default=None):
    for n in names:
        if raw.get(n) is not None:
            return raw[n]
    return default


def rope_fields(raw: dict, family: str) -> dict:
    """Our rope_* fields from rope_parameters, or the older rope_theta + rope_scaling."""
    params = dict(raw.get("rope_parameters") or {})
    scaling = dict(raw.get("rope_scaling") or {})
    merged = {**scaling, **params}
    kind = merged.get("rope_type", merged.get("type", "default")) or "default"
    if kind not in ROPE_TYPES:
        raise CheckpointError(f"RoPE type {kind!r} is not supported; supported: {', '.join(sorted(ROPE_TYPES))}")
    theta = _get(merged, "rope_theta", default=_get(raw, "rope_theta", default=10000.0))
    trained = _get(merged, "original_max_position_embeddings", default=0)
    if kind == "dynamic" or (kind in ("yarn", "llama3") and not trained):
        trained = raw.get("max_position_embeddings", trained)      # as transformers fills it in
    factor = _get(merged, "factor", default=1.0)
    attention = _get(merged, "attention_factor", default=0.0)
    if kind == "yarn":
        if merged.get("truncate", True) is False:
            raise CheckpointError("YaRN RoPE with truncate false is not supported")
        m, m_all = merged.get("mscale"), merged.get("mscale_all_dim")
        if not attention and m and m_all:                            # DeepSeek's form, as transformers reads it
            def mscale(s, k):
                return 1.0 if s <= 1 else 0.1 * k * math.log(s) + 1.0
            attention = mscale(float(factor), float(m)) / mscale(float(factor), float(m_all))
    return dict(rope_theta=float(theta), rope_type=kind, rope_factor=float(factor),
                rope_original_max=int(trained or 0),
                rope_low_freq_factor=float(_get(merged, "low_freq_factor", default=1.0)),
                rope_high_freq_factor=float(_get(merged, "high_freq_factor", default=4.0)),
                rope_beta_fast=float(_get(merged, "beta_fast", default=32.0)),
                rope_beta_slow=float(_get(merged, "beta_slow", default=1.0)),
                rope_attention_factor=float(attention))


def max_len(raw: dict) -> int:
    """The longest sequence we run: max_position_embeddings, or for dynamic NTK RoPE (made to run past the
    trained length; its base grows with the sequence) max_position_embeddings × factor."""
    n = int(raw.get("max_position_embeddings", 4096))
    rope = {**(raw.get("rope_scaling") or {}), **(raw.get("rope_parameters") or {})}
    if (rope.get("rope_type") or rope.get("type")) == "dynamic":
        n = int(n * max(1.0, float(rope.get("factor") or 1.0)))
    return min(n, LIMITS["max_len"])
