"""A sentence encoder's embedding of a text: the last layer's hidden states pooled, passed through the Dense
layers and normalised as its sentence-transformers folder says (core.st_folder.sentence_pipeline), and the
cosine similarity of two texts' embeddings.

    pipe = sentence_pipeline(hm.path)
    sim = similarity(hm.run("A cat sat."), hm.run("A dog sat."), pipe)      # in [-1, 1]
"""
from __future__ import annotations

import math

import torch

from viz_transformer.core.hook_names import layer_name
from viz_transformer.core.st_folder import ACTIVATIONS, SentencePipeline



def hidden_states(run) -> torch.Tensor:
    """[T, d] float64: an encoder-only run's last hidden states (batch 0)."""
    n = run.cache.n_layers.get("encoder", 0)
    if not n or run.cache.n_layers.get("decoder"):
        raise ValueError("a pooled sentence embedding needs an encoder-only model (BERT, a sentence encoder)")
    return run.cache[layer_name("encoder", n - 1, "hook_resid_post")][0].double()


def pool(h: torch.Tensor, mode: str) -> torch.Tensor:
    """[d]: the pieces' states [T, d] pooled as sentence-transformers pools one unpadded text."""
    T = h.shape[0]
    if mode == "cls":
        return h[0]
    if mode == "lasttoken":
        return h[-1]
    if mode == "max":
        return h.max(0).values
    if mode == "mean":
        return h.mean(0)
    if mode == "mean_sqrt_len_tokens":
        return h.sum(0) / math.sqrt(T)
    if mode == "weightedmean":                   # piece i (from 1) weighs i
        w = torch.arange(1, T + 1, dtype=h.dtype)
        return (h * w[:, None]).sum(0) / w.sum()
    raise ValueError(f"unknown pooling mode {mode!r}")


def embedding(run, pipe: SentencePipeline = SentencePipeline()) -> torch.Tensor:
    """[d'] float64: the text's sentence embedding, as the folder's pipeline makes it (the modes' poolings
    concatenated, each Dense layer, then unit length when it normalises)."""
    h = hidden_states(run)
    x = torch.cat([pool(h, m) for m in pipe.modes])
    for layer in pipe.dense:
        x = ACTIVATIONS[layer.activation](layer.weight @ x + (layer.bias if layer.bias is not None else 0))
    return torch.nn.functional.normalize(x, dim=0) if pipe.normalize else x


def similarity(run_a, run_b, pipe: SentencePipeline = SentencePipeline()) -> float:
    """The cosine similarity of two runs' sentence embeddings."""
    return float(torch.nn.functional.cosine_similarity(embedding(run_a, pipe), embedding(run_b, pipe), dim=0))
