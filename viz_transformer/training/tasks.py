"""What the two training tasks do differently: translation (TranslationTask) and language modelling (LMTask) each
read their data and split it, give the tokenizer its text, batch an epoch, make a batch's inputs and targets, and
score the validation split; train.py runs either through the same loop. `tc`: the run's train.TrainConfig.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Optional

import torch

from viz_transformer.core.config import ModelConfig
from viz_transformer.training import data as D
from viz_transformer.training.evaluation import lm_perplexity, score_translation
from viz_transformer.training.grad_norms import KEY as GRAD_NORMS, init_gradient_norms
from viz_transformer.training.masked_lm import FillRecorder, fill_scores, mask_rows
from viz_transformer.training.resume import ResumeError
from viz_transformer.training.snapshots import Recorder
from viz_transformer.training.step import encode_translation, translation_inputs


def translation_batches(pairs_ids, batch_size: int, seed: int, fast: bool = True):
    """Length-bucketed batches (lists of indices) of (src ids, tgt ids) or (sequence ids, prompt
    length): the items shuffled by seed, sorted by length within a pool, cut into batches, and the
    batches shuffled. fast: the pool is the whole epoch and pairs sort by target length first (the
    decoder and the vocabulary projection cost the most), so a batch pads little; ties keep the
    shuffled order, so equal-length items meet different neighbours each epoch. Not fast (as before):
    pools of 50 batches, pairs sorted by source length first."""
    rng = random.Random(seed)
    idx = list(range(len(pairs_ids)))
    rng.shuffle(idx)
    lengths = [tuple(x if isinstance(x, int) else len(x) for x in p) for p in pairs_ids]
    if fast:
        chunk = max(1, len(idx))
        key = (lambda i: lengths[i][::-1]) if pairs_ids and not isinstance(pairs_ids[0][1], int) else lengths.__getitem__
    else:
        chunk, key = batch_size * 50, lengths.__getitem__
    batches = []
    for c in range(0, len(idx), chunk):
        part = sorted(idx[c:c + chunk], key=key)
        batches += [part[b:b + batch_size] for b in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


class TranslationTask:
    """Pairs split by source, the loss on the target alone, BLEU on the validation pairs (higher is better); the
    gradient norms at initialisation and, with tc.snapshots, attention over training recorded."""
    split = "by_source"

    def __init__(self, tc, model_kw: dict):
        self.tc = tc
        pairs = D.read_pairs(tc.data, tc.data_tgt)
        self.train_items, self.val, self.test = D.split_by_source(pairs, tc.seed, tc.n_test, tc.n_val)
        if tc.extra_train:
            src_f, tgt_f = tc.extra_train.split(",")
            self.train_items = self.train_items + D.read_pairs(src_f, tgt_f, detok=True)
        self.tok_text = [s for s, _ in self.train_items] + [t for _, t in self.train_items]
        self.arch = model_kw.get("architecture") or "encoder_decoder"

    def encode(self, tok, cfg: ModelConfig) -> int:
        """The training pairs as ids for cfg's architecture; returns the steps in an epoch."""
        self.enc = encode_translation(tok, self.train_items, cfg.architecture, self.tc.max_tokens)
        return math.ceil(len(self.enc) / self.tc.batch_size)

    def batches(self, epoch: int) -> list:
        return translation_batches(self.enc, self.tc.batch_size, self.tc.seed + epoch, fast=self.tc.fast)

    def inputs(self, batch, cfg: ModelConfig, pad_id: int, device):
        return translation_inputs(self.enc, batch, cfg.architecture, pad_id, device)

    def evaluate(self, model, tok, best: Optional[dict]) -> tuple[dict, bool]:
        metrics = score_translation(model, tok, self.val, self.tc.eval_limit)
        return metrics, best is None or metrics["bleu"] > best["bleu"]

    def measure_start(self, info: dict, cfg: ModelConfig, tok) -> None:
        """The gradient norms at initialisation (grad_norms.py) into info, unless it has them."""
        if GRAD_NORMS not in info:
            info[GRAD_NORMS] = init_gradient_norms(cfg, tok, self.train_items, max_tokens=self.tc.max_tokens,
                                                   label_smoothing=self.tc.label_smoothing)

    def recorder(self, work: Path, total: int, tok, cfg: ModelConfig) -> Optional[Recorder]:
        if not self.tc.snapshots:
            return None
        bleu_val = self.val[: self.tc.snapshot_bleu_n]
        return Recorder(work, total, lambda m: score_translation(m, tok, bleu_val, max_new_tokens=40)["bleu"],
                        len(bleu_val), cfg.architecture)


class LMTask:
    """Stories split by story, blocks of block_size tokens with new boundaries every epoch (a prefix LM: a random
    bidirectional prefix per block), perplexity on the validation blocks (lower is better)."""
    split = "by_story"

    def __init__(self, tc, model_kw: dict):
        self.tc = tc
        self.train_items, self.val, self.test = D.split(D.read_stories(tc.data), tc.seed, 0, tc.n_val)
        self.tok_text = [line for doc in self.train_items for line in doc.splitlines() if line.strip()]
        arch = model_kw.get("architecture") or "decoder_only"
        self.arch = "decoder_only" if arch == "encoder_decoder" else arch

    def encode(self, tok, cfg: ModelConfig) -> int:
        """The training and validation stories as one token stream each; returns the steps in an epoch."""
        bs = self.tc.block_size
        self.train_ids, self.val_blocks = D.token_stream(self.train_items, tok), D.blocks(D.token_stream(self.val, tok), bs)
        n_blocks = (len(self.train_ids) - 1) // bs
        return math.ceil(n_blocks / self.tc.batch_size)

    def batches(self, epoch: int) -> list:
        tc = self.tc
        g = torch.Generator().manual_seed(tc.seed + epoch)
        shift = int(torch.randint(0, tc.block_size, (1,), generator=g))   # new block boundaries each epoch
        self.epoch_blocks = D.blocks(self.train_ids[shift:], tc.block_size)   # (n, block + 1)
        n = len(self.epoch_blocks)
        order = torch.randperm(n, generator=g)
        return [order[b:b + tc.batch_size] for b in range(0, n, tc.batch_size)]

    def inputs(self, batch, cfg: ModelConfig, pad_id: int, device):
        x, pl = self.epoch_blocks[batch].to(device), None
        if cfg.architecture == "prefix_lm":
            # a random bidirectional prefix per sequence; positions inside it see their
            # next token, so only predictions from the last prefix position on are scored
            pl = torch.randint(1, self.tc.block_size // 2 + 1, (x.shape[0],)).to(device)
            y = x[:, 1:].masked_fill(torch.arange(self.tc.block_size, device=device)[None] < (pl[:, None] - 1), pad_id)
        else:
            y = x[:, 1:]
        return x[:, :-1], None, pl, y

    def evaluate(self, model, tok, best: Optional[dict]) -> tuple[dict, bool]:
        metrics = {"perplexity": round(lm_perplexity(model, self.val_blocks[: self.tc.eval_limit]), 3)}
        return metrics, best is None or metrics["perplexity"] < best["perplexity"]

    def measure_start(self, info: dict, cfg: ModelConfig, tok) -> None:
        pass

    def recorder(self, work: Path, total: int, tok, cfg: ModelConfig) -> None:
        return None


class MaskedLMTask(TranslationTask):
    """A masked LM (BERT) on both sides of sentence pairs: each training sentence alone, Chinese and English, and
    a quarter of the pairs as "[CLS] a [SEP] b [SEP]" (segment 1 for b, the two sides in a random order), so the
    second segment's embedding is trained and a blank can be filled from its translation. Split by source sentence
    as a translator's, so no held-out sentence (or its translation) is trained on; BERT's masking, drawn anew every
    epoch (masked_lm.mask_rows); top-5 fill-in accuracy on the validation pairs picks the best epoch."""
    split = "by_source"
    pair_share = 0.25

    def __init__(self, tc, model_kw: dict):
        super().__init__(tc, model_kw)              # a translator's pairs, split and tokenizer text
        self.arch = "encoder_only"

    def encode(self, tok, cfg: ModelConfig) -> int:
        if tok.mask_id is None:
            raise ResumeError("a masked LM needs a tokenizer with [MASK] (trained with --task mlm)")
        limit = min(self.tc.max_tokens, cfg.max_len - 2)
        enc = [(tok.encode(s), tok.encode(t)) for s, t in self.train_items]
        self.enc = [(a, b) for a, b in enc if len(a) <= limit and len(b) <= limit]
        self.limit, self._tok = cfg.max_len, tok
        return math.ceil(len(self.enc) * (2 + self.pair_share) / self.tc.batch_size)

    def batches(self, epoch: int) -> list:
        """The epoch's sequences (self.epoch_rows: ids and segment ids), batched by length."""
        rng = random.Random(self.tc.seed + epoch)
        bos, eos = self._tok.bos_id, self._tok.eos_id
        rows = [([bos] + s + [eos], None) for pair in self.enc for s in pair]
        for a, b in self.enc:
            if rng.random() < self.pair_share:
                a, b = (a, b) if rng.random() < 0.5 else (b, a)
                ids = ([bos] + a + [eos] + b + [eos])[: self.limit]
                rows.append((ids, len(a) + 2))
        self.epoch_rows = rows
        self.generator = torch.Generator().manual_seed(self.tc.seed * 1000 + epoch)   # the same masks on a resume
        return translation_batches([(len(r), 0) for r, _ in rows], self.tc.batch_size, self.tc.seed + epoch)

    def inputs(self, batch, cfg: ModelConfig, pad_id: int, device):
        """(x, None, None, y, segment ids): the masked sequences, their targets, segment 1 after a pair's [SEP]."""
        rows = [self.epoch_rows[i] for i in batch]
        x, y = mask_rows([r for r, _ in rows], self._tok, self.generator)
        types = torch.zeros_like(x)
        for j, (_, first) in enumerate(rows):
            if first is not None:
                types[j, first:] = 1
        types = types.masked_fill(x == pad_id, 0)
        return x.to(device), None, None, y.to(device), types.to(device)

    def evaluate(self, model, tok, best: Optional[dict]) -> tuple[dict, bool]:
        metrics = fill_scores(model, tok, self.val, self.tc.eval_limit)
        return metrics, best is None or metrics["top5"] > best["top5"]

    def measure_start(self, info: dict, cfg: ModelConfig, tok) -> None:
        pass

    def recorder(self, work: Path, total: int, tok, cfg: ModelConfig) -> Optional[Recorder]:
        if not self.tc.snapshots:
            return None
        val = self.val[: self.tc.snapshot_bleu_n]
        return FillRecorder(work, total, lambda m: 100 * fill_scores(m, tok, val)["top5"], 2 * len(val),
                            cfg.architecture)


TASKS = {"translation": TranslationTask, "lm": LMTask, "mlm": MaskedLMTask}
