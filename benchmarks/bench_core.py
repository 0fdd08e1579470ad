"""Benchmarks for the core library: prints times and ratios measured in one run.

    python benchmarks/bench_core.py [--checkpoint checkpoints/zh-en]

Goals (issue 3/2): a checkpoint loads in < 1 s; KV-cache decoding beats full recompute;
capturing every hook costs a small factor over a plain forward.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from viz_transformer import load_checkpoint
from viz_transformer.inputs import encode_source  # noqa: E402


def timeit(fn, repeat: int = 5) -> float:
    """Median seconds of `repeat` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


@torch.no_grad()
def greedy_full_recompute(model, src, steps: int) -> list[int]:
    """Reference decoder without a cache: re-run the whole prefix at every step."""
    ids = [model.cfg.bos_id]
    memory, src_mask = model.encode(src)
    for _ in range(steps):
        logits = model.decode(torch.tensor([ids]), memory, src_mask)
        ids.append(int(logits[0, -1].argmax()))
    return ids[1:]


@torch.no_grad()
def greedy_cached(model, src, steps: int) -> list[int]:
    cache = model.new_cache(src)
    cur, out = torch.tensor([[model.cfg.bos_id]]), []
    for _ in range(steps):
        nxt = int(model.decode(cur, cache=cache)[0, -1].argmax())
        out.append(nxt)
        cur = torch.tensor([[nxt]])
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", default="checkpoints/zh-en")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    load_s = timeit(lambda: load_checkpoint(args.checkpoint), repeat=3)
    print(f"load {args.checkpoint}: {load_s * 1000:.0f} ms (goal < 1000 ms)")
    hm = load_checkpoint(args.checkpoint)
    model = hm.model
    if not hm.cfg.is_encoder_decoder:
        print("decoding benchmarks need an encoder-decoder checkpoint; done")
        return

    for n in (16, 128, 512):
        n = min(n, hm.cfg.max_len)
        src = torch.randint(10, hm.cfg.vocab_size, (1, n))
        tgt = torch.randint(10, hm.cfg.vocab_size, (1, min(n, 64)))
        with torch.no_grad():
            plain = timeit(lambda: model(src, tgt))
        cached = timeit(lambda: model.run_with_cache(src, tgt))
        print(f"source {n:>3} tokens: forward {plain * 1000:7.1f} ms, run_with_cache (every hook) "
              f"{cached * 1000:7.1f} ms, ratio {cached / plain:.2f}x")

    src = torch.tensor([encode_source(hm.tokenizer, hm.cfg, "我是一名工程师，我每天都在公司里写很多代码。").ids])
    steps = 48
    assert greedy_cached(model, src, steps) == greedy_full_recompute(model, src, steps), "cache changed the output"
    full = timeit(lambda: greedy_full_recompute(model, src, steps), repeat=3)
    kv = timeit(lambda: greedy_cached(model, src, steps), repeat=3)
    print(f"greedy {steps} tokens: full recompute {full * 1000:.0f} ms, KV cache {kv * 1000:.0f} ms, "
          f"speed-up {full / kv:.2f}x (same tokens)")


if __name__ == "__main__":
    main()
