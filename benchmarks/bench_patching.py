"""Benchmark for patching_scores: the batched patching against one forward per component, timed in the
same run, and a check that both give the same scores.

    python -m benchmarks.bench_patching [--checkpoint checkpoints/zh-en]

Goal: the 72 heads of zh-en for a 10-piece pair in <= 5 s on 2 cores.
"""
from __future__ import annotations

import argparse
import time

import torch

from benchmarks.bench_core import timeit  # (one timing helper for every benchmark)
from viz_transformer import load_checkpoint
from viz_transformer.run.patching import OVER, components, output_logprob, patched_logits, patching_scores, prepare_pair

PAIRS = [("我爱你。", "你爱我。"),
         ("他是我的朋友，也是一名很好的工程师。", "她是我的朋友，也是一名很好的医生。")]   # 3 and 10 pieces


def naive(hm, pair, over: str) -> list[float]:
    """One forward per component, as a notebook would write it."""
    n_pos = len(pair.src_a if hm.cfg.is_encoder_decoder else pair.dec_a)
    patches, _ = components(hm.cfg, over, n_pos)
    lp_a = float(output_logprob(hm, pair, pair.logits_a)[0])
    lp_b = float(output_logprob(hm, pair, patched_logits(hm, pair, [[]]))[0])
    return [(float(output_logprob(hm, pair, patched_logits(hm, pair, [[p]]))[0]) - lp_b) / (lp_a - lp_b)
            for p in patches]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", default="checkpoints/zh-en")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    hm = load_checkpoint(args.checkpoint)
    print(f"{args.checkpoint}: {args.threads} threads")
    for a, b in PAIRS:
        pair = prepare_pair(hm, a, b)
        print(f"{a!r} / {b!r}: {len(pair.pieces_a) - 1} pieces + [end]; {pair.output_a!r} / {pair.output_b!r}")
        for over in OVER:
            total = timeit(lambda: patching_scores(hm, a, b, over), args.repeat)       # the pair prepared inside
            batched = timeit(lambda: patching_scores(hm, a, b, over, pair=pair), args.repeat)
            df = patching_scores(hm, a, b, over, pair=pair)
            t = time.perf_counter()
            ref = naive(hm, pair, over)
            loop = time.perf_counter() - t
            err = max(abs(x - y) for x, y in zip(df["score"], ref))
            goal = " (goal <= 5 s)" if over == "heads" else ""
            print(f"  over={over:<6} {len(df):>3} rows: {total:.2f} s with the pair's runs{goal}, patching alone "
                  f"{batched:.2f} s, one forward per row {loop:.2f} s, speed-up {loop / batched:.1f}x; "
                  f"max |score difference| {err:.1e}")


if __name__ == "__main__":
    main()
