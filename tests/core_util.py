"""Helpers for the core tests: tiny random Transformers built directly from a ModelConfig."""
from __future__ import annotations

import torch

from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import Transformer

ARCHS = ("encoder_decoder", "decoder_only", "prefix_lm")
VOCAB = 50


def tiny_model(architecture: str = "encoder_decoder", seed: int = 0, **over) -> Transformer:
    """A random tiny model in eval mode (dropout 0). Ids 0..3 are pad/unk/bos/eos."""
    torch.manual_seed(seed)
    kw = dict(vocab_size=VOCAB, d_model=16, n_heads=2, n_encoder_layers=2, n_decoder_layers=2, d_ff=32,
              dropout=0.0, max_len=32, architecture=architecture)
    if architecture != "encoder_decoder":
        kw["n_encoder_layers"] = 0
    kw.update(over)
    return Transformer(ModelConfig(**kw)).eval()


def rand_ids(B: int, T: int, seed: int = 0) -> torch.Tensor:
    """Random real tokens (never pad/unk/bos/eos)."""
    return torch.randint(4, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


def other_token(t: int) -> int:
    """A different real token id."""
    return 4 + (t - 4 + 7) % (VOCAB - 4)


def perturb(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Add noise to every parameter (LayerNorm gains, biases ...), so a missing or misplaced one shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))
    return module.eval()
