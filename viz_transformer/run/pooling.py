"""A sentence encoder's embedding of a text: the last layer's hidden states pooled as its sentence-transformers
folder says (1_Pooling/config.json: mean over the pieces, the [CLS] piece, or the maximum), and the cosine
similarity of two texts' embeddings.

    sim = similarity(hm, hm.run("A cat sat."), hm.run("A dog sat."))      # in [-1, 1]
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from viz_transformer.core.checkpoint_files import MAX_JSON_BYTES
from viz_transformer.core.hook_names import layer_name

MODES = ("mean", "cls", "max")
POOLING = "sentence_transformers.models.Pooling"


def pooling_mode(folder) -> str:
    """The pooling a sentence-transformers folder names ("mean" when it names none, or is not one)."""
    folder = Path(folder) if folder is not None else None
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8")) if folder else []
        sub = next(m.get("path", "") for m in modules if isinstance(m, dict) and m.get("type") == POOLING)
        path = folder / str(sub) / "config.json"
        if path.stat().st_size > MAX_JSON_BYTES or not path.resolve().is_relative_to(folder.resolve()):
            return "mean"
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, StopIteration, TypeError, AttributeError):
        return "mean"
    return "cls" if cfg.get("pooling_mode_cls_token") else "max" if cfg.get("pooling_mode_max_tokens") else "mean"


def pooled(run, mode: str = "mean") -> torch.Tensor:
    """[d_model]: an encoder-only run's last hidden states (batch 0) pooled over its pieces."""
    if mode not in MODES:
        raise ValueError(f"pooling must be one of {', '.join(MODES)}, not {mode!r}")
    n = run.cache.n_layers.get("encoder", 0)
    if not n or run.cache.n_layers.get("decoder"):
        raise ValueError("a pooled sentence embedding needs an encoder-only model (BERT, a sentence encoder)")
    h = run.cache[layer_name("encoder", n - 1, "hook_resid_post")][0].double()      # (T, d)
    return h[0] if mode == "cls" else h.max(0).values if mode == "max" else h.mean(0)


def similarity(hm, run_a, run_b, mode: str = "") -> float:
    """The cosine similarity of two runs' pooled embeddings (mode: the folder's own pooling when not given)."""
    mode = mode or pooling_mode(hm.path)
    a, b = pooled(run_a, mode), pooled(run_b, mode)
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))
