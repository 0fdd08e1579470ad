"""Encoder-decoder, decoder-only and prefix-LM side by side: where the target reads the source, the
segments of one sequence, and the rank of attention patterns. Pure tensor code on captured runs.

A causal pattern is lower-triangular with a positive diagonal (softmax never gives exactly 0 to an
allowed key, and a query may always attend to itself), so its determinant - the product of the
diagonal - is positive: full rank. A bidirectional pattern has no such guarantee and can collapse
toward low rank (every row alike). `spectrum` and `effective_rank` measure it on real patterns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd
import torch

from viz_transformer.analysis.pattern_rows import pattern_rows
from viz_transformer.analysis.piece_labels import query_labels
from viz_transformer.core.hook_names import available_blocks, hook_name, n_layers  # noqa: F401  (the pages' names)


@dataclass
class Segments:
    """Where the parts of a decoder sequence lie: [0, source_start) = [begin]; the source pieces;
    [target_start, end) = what the model generated (or was teacher-forced on)."""
    source_start: int
    source_end: int      # exclusive: [sep] (one sequence) sits here
    target_start: int


def segments(run, cfg) -> Optional[Segments]:
    """Segments of a one-sequence translator's run ([begin] src [sep] tgt); None otherwise."""
    if cfg.is_encoder_decoder or cfg.sep_id < 0:
        return None
    return Segments(1, run.prompt_len - 1, run.prompt_len)


def source_attention(run, cfg, layer: int, head="mean"):
    """How each target position reads the source: (weights [target, source], target row labels "▁an → ▁engineer"
    (analysis.query_labels), source pieces). Encoder-decoder: the layer's cross-attention. One sequence: the layer's self-attention
    rows of the target positions, columns of the source pieces (the rest of each row goes to
    [begin], [sep] and the target itself, so rows sum to less than 1)."""
    if cfg.is_encoder_decoder:
        p = run.cache[hook_name("decoder.cross_attn", layer, "hook_pattern")][0]           # (H, T, S)
        q_pieces, k_pieces = query_labels(run, "decoder.cross_attn"), run.src_pieces
        rows, cols = slice(0, len(q_pieces)), slice(0, len(k_pieces))
    else:
        seg = segments(run, cfg)
        if seg is None:
            raise ValueError("a language model has no source: pick a translator")
        p = run.cache[hook_name("decoder.self_attn", layer, "hook_pattern")][0]            # (H, T, T)
        rows, cols = slice(seg.target_start - 1, len(run.tgt_pieces)), slice(seg.source_start, seg.source_end)
        q_pieces, k_pieces = query_labels(run, "decoder.self_attn")[rows], run.tgt_pieces[cols]
    p = p[:, rows, cols]
    w = p.mean(0) if head == "mean" else p[head]
    return w, list(q_pieces), list(k_pieces)


def spectrum(pattern: torch.Tensor) -> torch.Tensor:
    """Singular values of each head's [q, k] pattern, largest first: [head, min(q, k)]."""
    return torch.linalg.svdvals(pattern.double()).float()


def effective_rank(s: torch.Tensor) -> torch.Tensor:
    """exp(entropy of the normalised singular values) (Roy & Vetterli 2007), over the last axis:
    n for n equal singular values, 1 for a rank-one matrix."""
    p = s / s.sum(-1, keepdim=True).clamp_min(1e-30)
    return torch.exp(-(p * torch.log(p.clamp_min(1e-30))).sum(-1))


RANK_MAX = 128      # an SVD costs n³: past this many pieces, evenly spaced queries and keys are analysed


def rank_window(n: int, most: int = RANK_MAX) -> torch.Tensor:
    """The positions whose rows and columns a self-attention pattern's rank is measured on: all n, or `most`
    evenly spaced from the first to the last. The same positions for queries and keys, so a causal pattern
    stays lower-triangular with its diagonal (still full rank) and a prefix keeps its block."""
    return torch.arange(n) if n <= most else torch.linspace(0, n - 1, most).round().long()


def self_spectra(run, cfg, most: int = RANK_MAX) -> dict:
    """{(block, layer): (singular values [head, m], n, causal)} of every self-attention pattern, measured on
    rank_window(n, most) of its n pieces (a compact run recomputes those query rows alone); causal: its mask is
    lower-triangular. One SVD per head, for the rank table and the spectra both."""
    out = {}
    for block in available_blocks(cfg):
        if block == "decoder.cross_attn":
            continue
        for layer in range(n_layers(cfg, block)):
            mask = run.cache[hook_name(block, layer, "hook_mask")][0, 0]                 # (n, n)
            idx = rank_window(mask.shape[-1], most)
            rows = pattern_rows(run.cache, block, layer, idx)                             # (H, m, n): those rows alone
            out[(block, layer)] = (spectrum(rows[:, :, idx]), mask.shape[-1],
                                   bool(torch.equal(mask, torch.tril(mask))))
    return out


def rank_table(run, cfg, model: str = "") -> pd.DataFrame:
    """One row per head of every self-attention block of `run`: see spectra_table."""
    return spectra_table(self_spectra(run, cfg), model)


def spectra_table(spectra: dict, model: str = "") -> pd.DataFrame:
    """One row per head of self_spectra's blocks: its effective rank, its size n (and m, the size measured:
    rank_window), the smallest singular value relative to the largest, and whether its mask was causal
    (lower-triangular)."""
    rows = []
    for (block, layer), (s, n, causal) in spectra.items():
        er = effective_rank(s)
        for h in range(s.shape[0]):
            rows.append({"model": model, "block": block, "layer": layer, "head": h, "n": n, "m": s.shape[-1],
                         "effective_rank": float(er[h]), "min_sv_ratio": float(s[h, -1] / s[h, 0]),
                         "causal": causal})
    return pd.DataFrame(rows)


def gradient_growth(grads: dict) -> dict:
    """What the per-layer gradient norms at initialisation (training.grad_norms) say, as numbers a page
    prints: for each placement, the output-side layer's norm ÷ the input-side layer's (pre_growth,
    post_growth), and post ÷ pre at the last and at the first layer (at_output, at_input)."""
    pre, post = grads["pre"], grads["post"]
    return {"pre_growth": pre[-1] / pre[0], "post_growth": post[-1] / post[0],
            "at_output": post[-1] / pre[-1], "at_input": post[0] / pre[0],
            "first": grads["layers"][0], "last": grads["layers"][-1]}


def norm_twins(pre_meta: dict, post_meta: dict, pre_loss: list, post_loss: list, share: float = 0.9) -> Optional[dict]:
    """What a pre-norm model and its post-norm twin (same data, split, budget and seed) show over training,
    as numbers a page prints; None unless both metas keep their validation curve (meta["curve"]).
    pre_loss / post_loss: the fine training-loss curves [(step, loss), ...] (training snapshots' loss_curve).
    - best BLEU of each, and at which update;
    - the updates each took to first reach `level` = share × the lower of the two bests (both reach it);
    - the training loss at the end of the warm-up (the first recorded step at or after it), where a
      post-norm model without warm-up would have diverged."""
    curves = pre_meta.get("curve"), post_meta.get("curve")
    if not all(curves):
        return None
    best = [max(c, key=lambda h: h["bleu"]) for c in curves]
    level = share * min(b["bleu"] for b in best)
    first = [next(h["step"] for h in c if h["bleu"] >= level) for c in curves]
    warmup = int((pre_meta.get("train_config") or {}).get("warmup", 0))

    def loss_at(curve):
        after = [v for s, v in curve if s >= warmup]
        return after[0] if after else None

    return {"steps": curves[0][-1]["step"], "post_steps": curves[1][-1]["step"],
            "pre_best": best[0]["bleu"], "post_best": best[1]["bleu"], "diff": best[1]["bleu"] - best[0]["bleu"],
            "pre_best_step": best[0]["step"], "post_best_step": best[1]["step"], "level": level,
            "pre_to": first[0], "post_to": first[1], "warmup": warmup,
            "pre_loss": loss_at(pre_loss), "post_loss": loss_at(post_loss)}


def schedule_sweep(meta: dict) -> Optional[dict]:
    """What a post-norm model's learning-rate sweep (meta["schedule_sweep"], written when it shipped) shows, as
    numbers a page prints; None without one. Each setting (schedule, peak rate, warm-up) ran from scratch for the
    same short budget with each norm placement:
    - per setting (rows), the best validation BLEU of post-norm and of pre-norm, pre minus post, and each curve;
    - the smallest and largest lead of pre-norm over post-norm, and on how many settings pre-norm led;
    - the setting picked for post-norm (its best), and the model's full-budget validation and test BLEU beside the
      model it replaced (meta["replaces"]), when recorded."""
    runs = (meta.get("schedule_sweep") or {}).get("runs") or []
    by = {(r["norm"], r["schedule"], r["lr"], r["warmup"]): r for r in runs}
    rows = []
    for (norm, *setting), post in by.items():
        pre = by.get(("pre", *setting))
        if norm == "post" and pre is not None:
            rows.append(dict(zip(("schedule", "lr", "warmup"), setting), post=post["bleu"], pre=pre["bleu"],
                             lead=round(pre["bleu"] - post["bleu"], 2), post_curve=post["curve"], pre_curve=pre["curve"]))
    if not rows:
        return None
    sweep, old, leads = meta["schedule_sweep"], meta.get("replaces") or {}, [r["lead"] for r in rows]
    return {"rows": rows, "epochs": sweep.get("budget_epochs"), "updates": sweep.get("budget_updates"),
            "val_pairs": sweep.get("val_pairs"), "n": len(rows), "pre_led": sum(x > 0 for x in leads),
            "lead_min": min(leads), "lead_max": max(leads),
            "picked": max((r for r in runs if r["norm"] == "post"), key=lambda r: r["bleu"]),
            "val": (meta.get("val") or {}).get("bleu"), "test": (meta.get("test") or {}).get("bleu"),
            "old_val": (old.get("val") or {}).get("bleu"), "old_test": (old.get("test") or {}).get("bleu")}
