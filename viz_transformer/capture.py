"""A checkpoint's model and tokenizer together: run text, get every captured tensor back.

    hm = load_checkpoint("checkpoints/zh-en")
    run = hm.run("我是一名工程师。")          # run.cache["decoder.0.cross_attn.hook_pattern"]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch

from .checkpoint import load_tokenizer, load_weights, read_config, read_meta
from .config import ModelConfig
from .decoding import Trace, allowed_logits, decode_ids, default_new_tokens, greedy_batch, greedy_ids, never_generated
from .hooks import Cache, NamesFilter, hooks_active
from .inputs import check_decoding, encode_input, encode_source, pad_rows
from .model import Transformer
from .positional import sinusoidal_table
from .tokenizer import Tokenizer


@dataclass
class Run:
    """One captured forward pass over a text and the output the model produced for it (or a given
    target), teacher-forced on exactly the ids that were generated: what the pages show is what
    the model computed."""
    text: str
    src_ids: Optional[list[int]]    # encoder input (text pieces + [end]); None for decoder-only
    src_pieces: Optional[list[str]]
    tgt_ids: list[int]              # decoder input: [begin] + output (translator), [begin] + prompt + output (LM)
    tgt_pieces: list[str]
    output: str                     # the output as text (display only)
    logits: torch.Tensor            # [tgt_pos, vocab]
    cache: Cache
    n_cut: int = 0                  # pieces of the text dropped to fit max_len ...
    cut_at: str = "end"             # ... at its "end" (translator) or its "start" (LM)
    prefix_len: Optional[int] = None
    output_ids: list[int] = field(default_factory=list)   # = tgt_ids[prompt_len:], never a final [end]
    prompt_len: int = 1             # decoder positions before the output: [begin] (+ the prompt for an LM)
    trace: Optional[Trace] = None   # the greedy trace that produced the output (None for a given target)
    predicted: list[str] = field(default_factory=list)   # per decoder row, the piece it predicts: argmax of its
                                    # logits without the never-generated ids, as greedy picks (analysis.query_labels)

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

    def translate(self, texts: list[str], max_new_tokens: Optional[int] = None) -> list[str]:
        return greedy_batch(self.model, self.tokenizer, texts, max_new_tokens=max_new_tokens)

    @torch.no_grad()
    def run(self, text: str, target: Optional[str] = None, names_filter: NamesFilter = None,
            max_new_tokens: Optional[int] = None, fwd_hooks=()) -> Run:
        """Capture one forward pass. The text becomes ids once; the model's greedy output is
        generated on those ids (or `target` is used), and the decoder is teacher-forced on
        [begin] + those very ids (+ the prompt before them, for an LM). fwd_hooks: (name, fn)
        pairs active for the generation and the capture of this call only."""
        tok, cfg, model = self.tokenizer, self.cfg, self.model
        max_new_tokens = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
        check_decoding(cfg, cfg.vocab_size, max_new_tokens)
        hooks = model.resolve_hooks(fwd_hooks)
        target_ids = None if target is None else tok.encode(target)      # "" = the prompt alone
        reserve = max_new_tokens if target_ids is None else len(target_ids)
        enc = encode_input(tok, cfg, text, reserve=reserve)
        trace = None
        if target_ids is None:
            trace = decode_ids(model, tok, enc, "greedy", max_new_tokens, fwd_hooks=hooks)
            out_ids = trace.generated_ids
        else:
            out_ids = target_ids
        prompt = [cfg.bos_id] if cfg.is_encoder_decoder else list(enc.ids)
        out_ids = out_ids[: max(0, cfg.max_len - len(prompt))]     # a given target is cut at its end
        tgt_ids = prompt + out_ids
        prefix_len = len(prompt) if cfg.architecture == "prefix_lm" else None
        with hooks_active(hooks):
            if cfg.is_encoder_decoder:
                logits, cache = model.run_with_cache(torch.tensor([enc.ids]), torch.tensor([tgt_ids]),
                                                     names_filter=names_filter)
            else:
                logits, cache = model.run_with_cache(torch.tensor([tgt_ids]), prefix_len=prefix_len,
                                                     names_filter=names_filter)
        src_ids = list(enc.ids) if cfg.is_encoder_decoder else None
        predicted = tok.pieces(allowed_logits(logits[0], never_generated(tok)).argmax(-1).tolist())
        return Run(text, src_ids, tok.pieces(src_ids) if src_ids else None, tgt_ids, tok.pieces(tgt_ids),
                   tok.decode(out_ids), logits[0], cache, enc.n_cut, enc.cut_at, prefix_len, list(out_ids),
                   len(prompt), trace, predicted)

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


# -- runs the pages need besides the main one --------------------------------------------------------
@dataclass
class PaddedBatch:
    """Two texts run together, right-padded: pieces per row and the captured masks."""
    src_pieces: Optional[list[list[str]]]   # per row, encoder input incl. [pad] (None for an LM)
    tgt_pieces: list[list[str]]              # per row, decoder input incl. [pad]
    cache: Cache                             # batch = 2
    padded_row: int                          # the row that got padding (the shorter text)


def most_different(hm: HookedModel, text: str, candidates: list[str]) -> str:
    """The candidate whose piece count differs most from the text's (so the batch gets padding)."""
    n = len(hm.tokenizer.encode(text))
    return max(candidates, key=lambda c: abs(len(hm.tokenizer.encode(c)) - n))


@torch.no_grad()
def padded_batch(hm: HookedModel, text: str, other: str, max_new_tokens: Optional[int] = None,
                 names_filter: NamesFilter = None) -> PaddedBatch:
    """Run `text` and a second sentence as one right-padded batch so the padding mask shows; a
    translator's decoder input is each text's own greedy output ids, as in `HookedModel.run`.
    names_filter: the captures to keep (default all)."""
    cfg, tok = hm.cfg, hm.tokenizer
    texts = [text, other]
    if cfg.is_encoder_decoder:
        src_rows = [encode_source(tok, cfg, t).ids for t in texts]
        tgt_rows = [[cfg.bos_id] + ids for ids in greedy_ids(hm.model, tok, texts, max_new_tokens)]
        src, tgt = pad_rows(src_rows, cfg.pad_id), pad_rows(tgt_rows, cfg.pad_id)
        _, cache = hm.model.run_with_cache(src, tgt, names_filter=names_filter)
        lengths = [len(r) for r in src_rows]
        src_pieces = [tok.pieces(r.tolist()) for r in src]
    else:
        rows = [encode_input(tok, cfg, t).ids for t in texts]
        tgt = pad_rows(rows, cfg.pad_id)
        prefix = torch.tensor([len(r) for r in rows]) if cfg.architecture == "prefix_lm" else None
        _, cache = hm.model.run_with_cache(tgt, prefix_len=prefix, names_filter=names_filter)
        lengths, src_pieces = [len(r) for r in rows], None
    short = int(lengths[1] < lengths[0]) if lengths[0] != lengths[1] else 1
    return PaddedBatch(src_pieces, [tok.pieces(r.tolist()) for r in tgt], cache, short)


def positional_tables(hm: HookedModel, n: int) -> dict[str, Optional[torch.Tensor]]:
    """The first n rows of the sinusoidal table at this model's d_model, and of the model's own
    learned table when it has one: {"sinusoidal": [n, d], "learned": [n, d] or None}."""
    cfg = hm.cfg
    n = min(n, cfg.max_len)
    learned = None
    if cfg.positional == "learned":
        learned = hm.model.dec_embed.pos.matrix()[:n].detach().float().clone()
    return {"sinusoidal": sinusoidal_table(n, cfg.d_model), "learned": learned}


def load_checkpoint(path) -> HookedModel:
    """Load a checkpoint folder (no unpickling). Raises CheckpointError naming the bad file."""
    cfg = read_config(path)
    tok = load_tokenizer(path, cfg)
    model = load_weights(path, cfg)
    return HookedModel(model, tok, path, read_meta(path))
