"""Interventions: knock attention heads out, switch the positional encoding off, and rank every head
by what knocking it out alone does to the output. Each intervention is a list of (hook name, fn) pairs
for `fwd_hooks` (`Transformer.run_with_hooks`, `HookedModel.run`, `decode`): active for one call only.

    off = head_ablation_hooks([("decoder.1.cross_attn", 3)], mode="zero", cfg=hm.cfg)
    hm.run("我是一名工程师。", fwd_hooks=off).output         # the translation with that head knocked out
    rank_heads(hm, "我是一名工程师。")                         # DataFrame, one row per head

Modes, for head h of a block (prefix "encoder.0.self_attn", "decoder.2.cross_attn", ...):
  "zero"     its hook_z slice [batch, q, h, :] is 0.
  "uniform"  its attention row is uniform over the keys its mask allows: its hook_scores become 0
             before the mask, so the model's own mask and softmax give exactly 1/(allowed keys) there
             and 0 elsewhere (a fully masked row stays all zero). Captured hook_scores show the zeros.
  "mean"     its hook_z is, at every query position, its mean over the query positions of the unablated
             teacher-forced run of the text (`head_means`): the encoder's source pieces + [end], the
             decoder's [begin] (+ prompt) + greedy output. A constant per head, so a full forward and
             incremental decoding with the KV cache (one new position per call) ablate identically.
"""
from __future__ import annotations

from typing import Callable, Optional

import pandas as pd
import torch

from viz_transformer.core.batch import forward, make_batch
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input
from viz_transformer.run.generation import generate
from viz_transformer.run.logit_rules import allowed_logits, never_generated
from viz_transformer.core.encoding import as_input, check_decoding
from viz_transformer.core.hook_names import available_blocks, block_prefix, n_layers, parse_prefix

MODES = ("zero", "uniform", "mean")
Head = tuple[str, int]          # (block prefix, head index), e.g. ("encoder.0.self_attn", 3)
Means = dict[str, torch.Tensor]  # block prefix -> [head, d_head]


def check_heads(heads, cfg=None) -> list[Head]:
    """(block prefix, head) pairs, checked; with `cfg` (a ModelConfig) also against the model's blocks,
    layers and heads. ValueError naming the valid range."""
    out = []
    for item in heads:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
            raise ValueError(f"a head is a (block prefix, head) pair such as ('encoder.0.self_attn', 3), not {item!r}")
        prefix, head = item
        block, layer = parse_prefix(prefix)
        hi = cfg.n_heads - 1 if cfg is not None else None
        if isinstance(head, bool) or not isinstance(head, int) or head < 0 or (hi is not None and head > hi):
            rng = f"0 … {hi}" if hi is not None else "a whole number ≥ 0"
            raise ValueError(f"head {head!r} of {prefix} is out of range: heads are {rng}")
        if cfg is not None:
            blocks = available_blocks(cfg)
            if block not in blocks:
                raise ValueError(f"{prefix!r}: this model has no {block} blocks, only {', '.join(blocks)}")
            n = n_layers(cfg, block)
            if layer >= n:
                raise ValueError(f"{prefix!r}: layer {layer} is out of range: {block} layers are 0 … {n - 1}")
        out.append((prefix, head))
    return out


def _hook(prefix: str, mode: str, heads: torch.Tensor, rows: Optional[torch.Tensor],
          means: Optional[Means]) -> tuple[str, Callable]:
    """One block's ablation hook: heads [n] in every batch row (rows None), or heads[i] in row rows[i]."""
    point = "hook_scores" if mode == "uniform" else "hook_z"
    mean = means[prefix] if mode == "mean" else None

    def fn(x: torch.Tensor, hook) -> torch.Tensor:
        n_heads = x.shape[1] if mode == "uniform" else x.shape[2]       # scores [B, nh, q, k]; z [B, q, nh, hs]
        if int(heads.max()) >= n_heads:
            raise ValueError(f"head {int(heads.max())} of {prefix} is out of range: heads are 0 … {n_heads - 1}")
        x = x.clone()
        if mode == "uniform":                       # a constant score row: the mask and softmax do the rest
            x[(slice(None) if rows is None else rows), heads] = 0.0
            return x
        if mean is not None and tuple(mean.shape) != (n_heads, x.shape[3]):
            raise ValueError(f"means[{prefix!r}] has shape {tuple(mean.shape)}, expected {(n_heads, x.shape[3])}")
        value = 0.0 if mean is None else mean[heads].to(x.device, x.dtype)   # (n, hs)
        if rows is None:
            x[:, :, heads] = value                                      # (B, q, n, hs) <- (n, hs)
        else:
            x[rows, :, heads] = value if mean is None else value.unsqueeze(1)   # (n, q, hs) <- (n, 1, hs)
        return x
    return f"{prefix}.{point}", fn


def check_mode(mode: str, means: Optional[Means], prefixes) -> None:
    """ValueError for an unknown ablation mode, or a mean ablation without a mean for each block in `prefixes`."""
    if mode not in MODES:
        raise ValueError(f"unknown ablation mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode == "mean" and prefixes:
        if means is None:
            raise ValueError("mode='mean' needs means=head_means(hm, text): each head's mean output")
        missing = [p for p in prefixes if p not in means]
        if missing:
            raise ValueError(f"means has no entry for {', '.join(missing)}")


def head_ablation_hooks(heads, mode: str = "zero", means: Optional[Means] = None,
                        cfg=None) -> list[tuple[str, Callable]]:
    """(hook name, fn) pairs that ablate every (block prefix, head) in `heads` in every batch row.
    means: `head_means(hm, text)`, needed by mode "mean". cfg: the model's ModelConfig, to check the
    heads now rather than when the hooks first run."""
    by_block: dict[str, list[int]] = {}
    for prefix, h in check_heads(heads, cfg):
        if h not in by_block.setdefault(prefix, []):
            by_block[prefix].append(h)
    check_mode(mode, means, by_block)
    return [_hook(p, mode, torch.tensor(hs), None, means) for p, hs in by_block.items()]


def _row_hooks(heads: list[Head], first_row: int, mode: str, means: Optional[Means]) -> list[tuple[str, Callable]]:
    """Hooks ablating heads[i] in batch row first_row + i only."""
    by_block: dict[str, tuple[list[int], list[int]]] = {}
    for i, (prefix, h) in enumerate(heads):
        rows, hs = by_block.setdefault(prefix, ([], []))
        rows.append(first_row + i)
        hs.append(h)
    return [_hook(p, mode, torch.tensor(hs), torch.tensor(rows), means) for p, (rows, hs) in by_block.items()]


def positions_off_hooks(hm) -> list[tuple[str, Callable]]:
    """Hooks that take every position signal out: each added positional encoding (`*.hook_pos`, [pos, d_model])
    becomes zero, and with RoPE each rotated q and k (`hook_rot_q` / `hook_rot_k`) is replaced by the same q or
    k before its rotation (`hook_q` / `hook_k`, seen a moment earlier in the same forward). The model then sees
    its tokens as a bag, with order only where a mask carries it (causal self-attention). T5's relative position
    bias (`*.hook_bias`, [1, head, q, k], layer 0's, added by every layer of its stack) becomes zero too."""
    hooks = [(n, lambda x, hook: torch.zeros_like(x)) for n in hm.hook_names if n.endswith((".hook_pos", ".hook_bias"))]
    for name in hm.hook_names:
        if name.endswith(".hook_rot_q") or name.endswith(".hook_rot_k"):
            before, kept = name.replace(".hook_rot_", ".hook_"), {}
            hooks += [(before, lambda x, hook, kept=kept: kept.__setitem__("x", x)),     # unchanged, remembered
                      (name, lambda x, hook, kept=kept: kept.pop("x"))]                  # the unrotated one instead
    return hooks


def head_means(hm, text: str, max_new_tokens: int = 64) -> Means:
    """Each attention block's hook_z averaged over its query positions in the unablated teacher-forced
    run of `text` (`hm.run`): {block prefix: [head, d_head]}, for mode "mean"."""
    run = hm.run(text, names_filter=lambda n: n.endswith(".hook_z"), max_new_tokens=max_new_tokens)
    return _means(run.cache)


def _means(cache) -> Means:
    return {name[: -len(".hook_z")]: cache[name][0].mean(0) for name in cache}   # (q, nh, hs) -> (nh, hs)


def all_heads(cfg) -> list[Head]:
    """Every (block prefix, head) of the model, blocks in reading order, then layer, then head."""
    return [(block_prefix(b, layer), h) for b in available_blocks(cfg) for layer in range(n_layers(cfg, b))
            for h in range(cfg.n_heads)]


@torch.no_grad()
def rank_heads(hm, text, mode: str = "zero", progress: Optional[Callable[[int, int], None]] = None,
               means: Optional[Means] = None, max_new_tokens: int = 64) -> pd.DataFrame:
    """What knocking out each head alone does to the unablated greedy output of `text` (a string, or the
    ModelInput a run already made: `run.input`).

    One row per head of every attention block (all_heads order): block (prefix), layer, head,
    delta_logprob = log P(output | that head ablated) - log P(output | unablated), both teacher-forced,
    summed over the output tokens and the final [end] when the greedy output ended with one, under the
    decoding distribution ([pad], [unk], [begin] at -inf); output_changed = greedy decoding with that
    head ablated gives different ids. Batched: one teacher-forced forward with a batch row per head
    (+ an unablated row), then one greedy loop with a KV cache and a row per head, stopped when every
    row has left the original output or reached its end. progress(done, total) is called after the
    forward and after each greedy step, last with done == total. means: as in head_ablation_hooks
    (default for mode "mean": head_means(hm, text)).
    """
    model, tok, cfg = hm.model, hm.tokenizer, hm.cfg
    check_decoding(cfg, cfg.out_vocab, max_new_tokens)
    heads = all_heads(cfg)
    check_mode(mode, None, ())                    # the mode's name, before any model run
    model.eval()
    banned = never_generated(tok)
    inp = as_input(tok, cfg, text, max_new_tokens)
    base = decode_input(model, tok, inp, DecodeSettings(max_new_tokens=max_new_tokens))
    if mode == "mean" and means is None:          # the unablated run's means, as head_means(hm, text)
        means = _means(forward(model, make_batch(cfg, [inp], [base.generated_ids]), capture=True,
                               names_filter=lambda n: n.endswith(".hook_z"))[1])
    check_mode(mode, means, {p for p, _ in heads})
    labels = torch.tensor(base.output_ids, dtype=torch.long)       # with a final [end], if it ended
    total = 1 + len(labels)
    report = progress or (lambda done, n: None)

    # one teacher-forced forward: row 0 unablated, row 1 + i ablates heads[i]
    logits, _ = forward(model, make_batch(cfg, [inp], [base.generated_ids]).expand(1 + len(heads)),
                        _row_hooks(heads, 1, mode, means))
    start, n = len(inp.prompt) - 1, len(labels)                                   # row start + t predicts labels[t]
    B = logits.shape[0]
    logp = torch.log_softmax(allowed_logits(logits[:, start:start + n], banned), -1)   # (B, n, V)
    summed = logp.gather(-1, labels.expand(B, n).unsqueeze(-1)).squeeze(-1).sum(-1)    # (B,)
    delta = (summed[1:] - summed[0]).tolist()
    report(1, total)

    # one greedy loop, a row per head: a row still on the original output has the original prefix,
    # so it changed iff some step's argmax differs from the original token there
    changed = torch.zeros(len(heads), dtype=torch.bool)

    def watch(t, logits, nxt, rows):
        changed.logical_or_(nxt != labels[t])
        if bool(changed.all()):
            return True
        if 2 + t < total:
            report(2 + t, total)
        return False
    generate(model, make_batch(cfg, [inp]).expand(len(heads)), n, banned, on_step=watch,
             fwd_hooks=_row_hooks(heads, 0, mode, means))
    report(total, total)
    return pd.DataFrame({"block": [p for p, _ in heads], "layer": [parse_prefix(p)[1] for p, _ in heads],
                         "head": [h for _, h in heads], "delta_logprob": delta,
                         "output_changed": changed.tolist()})
