"""A checkpoint's model and tokenizer together: run text, get every captured tensor back.

    hm = load_checkpoint("checkpoints/zh-en")
    run = hm.run("我是一名工程师。")          # run.cache["decoder.0.cross_attn.hook_pattern"]
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from .checkpoint import load_tokenizer, load_weights, read_config, read_meta
from .config import ModelConfig
from .decoding import fit_source, greedy_batch, require_text
from .hooks import Cache, NamesFilter
from .model import Transformer
from .tokenizer import Tokenizer


@dataclass
class Run:
    """One captured forward pass over a text (and, for a translator, its translation)."""
    text: str
    src_ids: Optional[list[int]]    # encoder input (text pieces + [end]); None for decoder-only
    src_pieces: Optional[list[str]]
    tgt_ids: list[int]              # decoder input: [begin] + translation, or [begin] + text
    tgt_pieces: list[str]
    output: str                     # the translation, or the greedy continuation
    logits: torch.Tensor            # [tgt_pos, vocab]
    cache: Cache
    n_cut: int = 0                  # pieces dropped because the text exceeded max_len
    prefix_len: Optional[int] = None

    def pieces(self, part: str) -> list[str]:
        """Token labels for the query/key axes of an attention block in `part`."""
        return self.src_pieces if part == "encoder" else self.tgt_pieces


class HookedModel:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, path=None, meta: Optional[dict] = None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.path = Path(path) if path is not None else None
        self.meta = meta or {}

    @property
    def cfg(self) -> ModelConfig:
        return self.model.cfg

    @property
    def name(self) -> str:
        return self.path.name if self.path else "model"

    @property
    def hook_names(self) -> list[str]:
        return list(self.model.hook_names)

    def source_ids(self, text: str, reserve: int = 1) -> tuple[list[int], int]:
        """Text -> ids cut to fit max_len - reserve. Returns (ids, number of pieces cut)."""
        require_text(text)
        ids = self.tokenizer.encode(text)
        room = self.cfg.max_len - reserve
        return ids[:room], max(0, len(ids) - room)

    def source_tensor(self, text: str) -> tuple[torch.Tensor, int]:
        """Encoder input [1, S]: the text's pieces then [end], as in training."""
        require_text(text)
        ids, cut = fit_source(self.tokenizer, self.cfg, text)
        return torch.tensor([ids]), cut

    def translate(self, texts: list[str], max_new_tokens: int = 64) -> list[str]:
        return greedy_batch(self.model, self.tokenizer, texts, max_new_tokens=max_new_tokens)

    def run(self, text: str, target: Optional[str] = None, names_filter: NamesFilter = None,
            max_new_tokens: int = 64) -> Run:
        """Capture one forward pass. Encoder-decoder: the decoder is teacher-forced on `target`,
        or on the model's own greedy translation when no target is given."""
        tok, cfg = self.tokenizer, self.cfg
        if cfg.is_encoder_decoder:
            src, cut = self.source_tensor(text)
            output = target if target is not None else self.translate([text], max_new_tokens)[0]
            tgt_ids = [cfg.bos_id] + tok.encode(output)[: cfg.max_len - 1]
            logits, cache = self.model.run_with_cache(src, torch.tensor([tgt_ids]), names_filter=names_filter)
            src_ids = src[0].tolist()
            return Run(text, src_ids, tok.pieces(src_ids), tgt_ids, tok.pieces(tgt_ids), output,
                       logits[0], cache, cut)
        ids, cut = self.source_ids(text, reserve=1)
        tgt_ids = [cfg.bos_id] + ids
        prefix_len = len(tgt_ids) if cfg.architecture == "prefix_lm" else None
        logits, cache = self.model.run_with_cache(torch.tensor([tgt_ids]), prefix_len=prefix_len,
                                                  names_filter=names_filter)
        output = target if target is not None else self.translate([text], max_new_tokens)[0]
        return Run(text, None, None, tgt_ids, tok.pieces(tgt_ids), output, logits[0], cache, cut, prefix_len)

    def run_with_cache(self, text: str, target: Optional[str] = None, names_filter: NamesFilter = None):
        """(logits [tgt_pos, vocab], Cache) for a text: the two-line notebook entry point."""
        r = self.run(text, target, names_filter)
        return r.logits, r.cache

    def describe(self) -> dict:
        cfg = self.cfg
        return {"architecture": cfg.architecture, "encoder layers": cfg.n_encoder_layers,
                "decoder layers": cfg.n_decoder_layers, "heads": cfg.n_heads, "d_model": cfg.d_model,
                "d_head": cfg.d_head, "d_ff": cfg.d_ff, "activation": cfg.activation, "norm": cfg.norm,
                "positional": cfg.positional, "max_len": cfg.max_len, "vocab": cfg.vocab_size,
                "parameters": sum(p.numel() for p in self.model.parameters())}


def load_checkpoint(path) -> HookedModel:
    """Load a checkpoint folder (no unpickling). Raises CheckpointError naming the bad file."""
    cfg = read_config(path)
    tok = load_tokenizer(path, cfg)
    model = load_weights(path, cfg)
    return HookedModel(model, tok, path, read_meta(path))
