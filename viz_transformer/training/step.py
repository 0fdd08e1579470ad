"""One training step, shared by a training run (train.py) and the gradient norms at initialisation (grad_norms.py):
encoded items as the model's inputs and next-token targets, the loss, the AdamW update at the schedule's rate.

`tc` below is a train.TrainConfig (its lr, warmup, schedule, weight_decay, label_smoothing, clip and fast).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from viz_transformer.core.batch import pad_rows


def target_only(x: torch.Tensor, prompt_len: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Next-token targets of sequences x [B, T] ([begin] src [sep] tgt [end]) with every prediction
    made before the last prompt position ([sep]) set to pad_id (ignored by the loss): [B, T - 1]."""
    pos = torch.arange(x.shape[1] - 1, device=x.device)[None]             # position that predicts
    return x[:, 1:].masked_fill(pos < prompt_len[:, None] - 1, pad_id)


def encode_translation(tok, items, arch: str, max_tokens: int) -> list[tuple]:
    """(source, target) texts -> training items, pairs longer than max_tokens skipped: (source ids [end],
    [begin] target ids [end]) for an encoder-decoder, else one sequence [begin] src [sep] tgt [end] and
    the prompt's length."""
    enc = [(tok.encode(s) + [tok.eos_id], [tok.bos_id] + tok.encode(t) + [tok.eos_id]) for s, t in items]
    enc = [p for p in enc if len(p[0]) <= max_tokens and len(p[1]) <= max_tokens + 1]
    if arch != "encoder_decoder":
        enc = [([tok.bos_id] + s[:-1] + [tok.sep_id] + t[1:], len(s) + 1) for s, t in enc]
    return enc


def translation_inputs(enc, batch, arch: str, pad_id: int, device="cpu"):
    """Batch indices into the encoded training items -> (x, tgt, prefix_len, y): the model's
    inputs and the next-token targets y (pad_id where nothing is scored)."""
    if arch == "encoder_decoder":
        src = pad_rows([enc[i][0] for i in batch], pad_id).to(device)
        tgt = pad_rows([enc[i][1] for i in batch], pad_id).to(device)
        return src, tgt[:, :-1], None, tgt[:, 1:]
    # one sequence: the loss on the target only, the predictions made from [sep] on
    x = pad_rows([enc[i][0] for i in batch], pad_id).to(device)
    pl = torch.tensor([enc[i][1] for i in batch], device=device)
    return x[:, :-1], None, pl if arch == "prefix_lm" else None, target_only(x, pl, pad_id)


def batch_loss(model, x, y, pad_id: int, label_smoothing: float, tgt=None, prefix_len=None,
               fast: bool = True, types=None) -> torch.Tensor:
    """Mean cross-entropy over the scored targets of y [B, T] (pad_id: not scored). fast: logits only at
    the scored positions (the vocabulary projection skips padding and prompts); the same loss. types: an
    encoder-only model's segment ids."""
    kw = {"types": types} if types is not None else {}
    if fast:
        scored = y != pad_id
        logits = model(x, tgt, prefix_len=prefix_len, logits_at=scored, **kw)       # (N, vocab)
        return F.cross_entropy(logits, y[scored], label_smoothing=label_smoothing)
    logits = model(x, tgt, prefix_len=prefix_len, **kw)                             # (B, T, vocab)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                           ignore_index=pad_id, label_smoothing=label_smoothing)


def make_optimizer(model, tc) -> torch.optim.AdamW:
    """AdamW, no weight decay on biases and norms; fast: the fused kernel where this torch has it."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if tc.fast:
        try:
            return torch.optim.AdamW(groups, lr=tc.lr, betas=(0.9, 0.98), fused=True)
        except (RuntimeError, TypeError):
            pass
    return torch.optim.AdamW(groups, lr=tc.lr, betas=(0.9, 0.98))


def train_step(model, opt, tc, x, y, pad_id: int, tgt=None, prefix_len=None, types=None) -> torch.Tensor:
    """One optimisation step (gradients clipped to tc.clip) at the learning rate already set; returns the loss."""
    loss = batch_loss(model, x, y, pad_id, tc.label_smoothing, tgt, prefix_len, fast=tc.fast, types=types)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip)
    opt.step()
    return loss.detach()


def lr_at(step: int, tc, total: int) -> float:
    """The learning rate at `step` of `total`: a linear warm-up, then inverse_sqrt or cosine (down to 5% of lr)."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    if tc.schedule == "inverse_sqrt":
        return tc.lr * math.sqrt(tc.warmup / (step + 1))
    progress = min(1.0, (step - tc.warmup) / max(1, total - tc.warmup))
    return tc.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))
