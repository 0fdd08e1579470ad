"""Benchmark for rank_heads: the batched ranking against the naive loop (one greedy decode and one
teacher-forced forward per head), timed in the same run, and a check that both give the same table.

    python -m benchmarks.bench_interventions [--checkpoint checkpoints/zh-en] [--text 我是一名工程师。]

Goal: all 72 heads of zh-en for a ~10-token sentence in <= 5 s on 2 cores.
"""
from __future__ import annotations

import argparse
import time

import torch

from benchmarks.bench_core import timeit  # (one timing helper for every benchmark)
from viz_transformer import load_checkpoint
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input
from viz_transformer.run.logit_rules import allowed_logits, never_generated
from viz_transformer.core.encoding import encode_input
from viz_transformer.run.interventions import MODES, all_heads, head_ablation_hooks, head_means, rank_heads


@torch.no_grad()
def naive(hm, text: str, mode: str, means, max_new_tokens: int = 64) -> list[tuple[float, bool]]:
    """(delta_logprob, output_changed) per head, one head at a time, as a notebook would write it."""
    model, tok, cfg = hm.model, hm.tokenizer, hm.cfg
    enc = encode_input(tok, cfg, text, reserve=max_new_tokens)
    base = decode_input(model, tok, enc, DecodeSettings(max_new_tokens=max_new_tokens))
    labels = base.output_ids
    prompt = [cfg.bos_id] if cfg.is_encoder_decoder else list(enc.ids)
    dec = torch.tensor([prompt + base.generated_ids])
    banned = never_generated(tok)

    def summed(hooks) -> float:
        if cfg.is_encoder_decoder:
            logits = model.run_with_hooks(torch.tensor([enc.ids]), dec, fwd_hooks=hooks)[0]
        else:
            P = len(prompt) if cfg.architecture == "prefix_lm" else None
            logits = model.run_with_hooks(dec, prefix_len=P, fwd_hooks=hooks)[0]
        logp = torch.log_softmax(allowed_logits(logits, banned), -1)
        return sum(float(logp[len(prompt) - 1 + t, y]) for t, y in enumerate(labels))

    clean, rows = summed([]), []
    for head in all_heads(cfg):
        hooks = head_ablation_hooks([head], mode, means)
        trace = decode_input(model, tok, enc, DecodeSettings(max_new_tokens=max_new_tokens), hooks=hooks)
        rows.append((summed(hooks) - clean, trace.output_ids != labels))
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", default="checkpoints/zh-en")
    p.add_argument("--text", nargs="+", default=["我是一名工程师。", "他是我的朋友，也是一名很好的工程师。"],
                   help="4 and 10 pieces")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    hm = load_checkpoint(args.checkpoint)
    n_heads = len(all_heads(hm.cfg))
    print(f"{args.checkpoint}: {n_heads} heads, {args.threads} threads")
    for text in args.text:
        print(f"{text!r}: {len(hm.tokenizer.encode(text))} pieces -> {hm.run(text).output!r}")
        for mode in MODES:
            means = head_means(hm, text) if mode == "mean" else None
            batched = timeit(lambda: rank_heads(hm, text, mode, means=means), args.repeat)
            df = rank_heads(hm, text, mode, means=means)
            t = time.perf_counter()
            ref = naive(hm, text, mode, means)                 # warmed up by the batched runs
            loop = time.perf_counter() - t
            err = max(abs(a - r[0]) for a, r in zip(df["delta_logprob"], ref))
            same = df["output_changed"].tolist() == [r[1] for r in ref]
            print(f"  mode={mode:<7}: batched {batched:.2f} s (goal <= 5 s), naive loop {loop:.2f} s, "
                  f"speed-up {loop / batched:.1f}x; max |delta difference| {err:.1e}, same output_changed: "
                  f"{same} ({int(df['output_changed'].sum())} of {n_heads} heads change the output)")


if __name__ == "__main__":
    main()
