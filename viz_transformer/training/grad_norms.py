"""Gradient norms at initialisation, layer by layer, with the norm before or after the residual.

Xiong et al. 2020 ("On Layer Normalization in the Transformer Architecture") show that at initialisation a
post-norm Transformer's gradients are large near the output and a pre-norm one's are about the same in every
layer; hence the original (post-norm) Transformer's learning-rate warm-up. `init_gradient_norms` measures
this on our own model: the same configuration and training batch, freshly initialised with the norm in each
place (dropout off), one backward pass of the training loss, the Frobenius norm of every layer's gradient,
averaged over a few initialisations. Stored in meta.json (KEY) so the app needs no training data.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import torch

from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import Transformer
from viz_transformer.training.step import batch_loss, encode_translation, translation_inputs

KEY = "init_grad_norms"


def layer_names(cfg: ModelConfig) -> list[str]:
    """The layers in order from the input to the output: encoder.0 … then decoder.0 …"""
    return [f"encoder.{i}" for i in range(cfg.n_encoder_layers)] + [f"decoder.{i}" for i in range(cfg.n_decoder_layers)]


def layer_gradient_norms(model: Transformer, names: Sequence[str]) -> list[float]:
    """‖∂loss/∂θ_layer‖ (all of a layer's parameters: attention, FFN, norms) per layer, after a backward."""
    out = []
    for name in names:
        grads = [p.grad.reshape(-1) for n, p in model.named_parameters() if n.startswith(name + ".") and p.grad is not None]
        out.append(float(torch.cat(grads).norm()) if grads else float("nan"))
    return out


def init_gradient_norms(cfg: ModelConfig, tok, pairs, seeds: Sequence[int] = (0, 1, 2), batch_size: int = 64,
                        max_tokens: int = 64, label_smoothing: float = 0.1) -> dict:
    """{"layers": [...], "pre": [...], "post": [...], "seeds": [...], "n_pairs": n}: per layer, the gradient
    norm of the training loss on the first `batch_size` training pairs at initialisation, the mean over
    `seeds`, for each norm placement (everything else as in cfg)."""
    arch = cfg.architecture
    enc = encode_translation(tok, pairs[: batch_size], arch, max_tokens)
    if not enc:
        raise ValueError("no training pair is short enough to measure gradients on")
    x, tgt, pl, y = translation_inputs(enc, list(range(len(enc))), arch, tok.pad_id)
    names = layer_names(cfg)
    out = {"layers": names, "seeds": list(seeds), "n_pairs": len(enc), "label_smoothing": label_smoothing}
    with torch.random.fork_rng():                    # the caller's random state (a training run's) is kept
        for norm in ("pre", "post"):
            runs = []
            for seed in seeds:
                torch.manual_seed(seed)
                model = Transformer(dataclasses.replace(cfg, norm=norm, dropout=0.0))
                model.train()
                batch_loss(model, x, y, tok.pad_id, label_smoothing, tgt, pl).backward()
                runs.append(layer_gradient_norms(model, names))
            out[norm] = [round(sum(r[i] for r in runs) / len(runs), 5) for i in range(len(names))]
    return out
