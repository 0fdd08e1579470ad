"""Benchmarks for the core library: prints times and ratios measured side by side in one run.

    python -m benchmarks.bench_core [--checkpoint checkpoints/zh-en] [--threads 1] [--json out.json]

Goals: a checkpoint loads in < 1 s; capturing every hook (run_with_cache) costs
<= 1.15x a plain forward at 32, 128 and 512 source pieces; greedy decoding with the KV cache is >= 3x
faster than recomputing the prefix at 64 new tokens, with the same tokens. One thread by default, as the app
runs (viz_explorer/server/threads.py). `measure(checkpoint)` returns the numbers for benchmarks/bench_app.py.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from benchmarks.texts import text_of
from viz_transformer import load_checkpoint
from viz_transformer.core.encoding import encode_source

GOAL_CAPTURE, GOAL_KV = 1.15, 3.0
SOURCE_PIECES, TARGET_PIECES, NEW_TOKENS = (32, 128, 512), 64, 64


def timeit(fn, repeat: int = 5) -> float:
    """Median seconds of `repeat` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def paired(fn_a, fn_b, repeat: int = 7) -> tuple[float, float, float]:
    """Median seconds of a and of b, called alternately (a, b, a, b, ...) after one warm-up each so a load
    change on a shared machine hits both, and the median of the per-pair ratios a / b."""
    fn_a(), fn_b()
    ta, tb = [], []
    for _ in range(repeat):
        for fn, out in ((fn_a, ta), (fn_b, tb)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb), statistics.median(a / b for a, b in zip(ta, tb))


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


def capture_overhead(hm, n: int, repeat: int = 7) -> dict:
    """A plain forward against run_with_cache (every hook) on a text of n source pieces and a 64-piece
    teacher-forced target."""
    model, cfg = hm.model, hm.cfg
    src = torch.tensor([encode_source(hm.tokenizer, cfg, text_of(hm.tokenizer, n)).ids])
    tgt = torch.randint(10, cfg.vocab_size, (1, min(TARGET_PIECES, cfg.max_len)),
                        generator=torch.Generator().manual_seed(0))
    tgt[0, 0] = cfg.bos_id

    def plain():
        with torch.no_grad():
            model(src, tgt)
    cap, fwd, ratio = paired(lambda: model.run_with_cache(src, tgt), plain, repeat)
    return {"source_pieces": src.shape[1], "target_pieces": tgt.shape[1], "forward_ms": fwd * 1000,
            "capture_ms": cap * 1000, "ratio": ratio, "goal": GOAL_CAPTURE, "met": ratio <= GOAL_CAPTURE}


def kv_speedup(hm, n: int, steps: int = NEW_TOKENS, repeat: int = 3) -> dict:
    """Greedy decoding of `steps` tokens (no stop at [end]) with and without the KV cache, same tokens."""
    model = hm.model
    src = torch.tensor([encode_source(hm.tokenizer, hm.cfg, text_of(hm.tokenizer, n)).ids])
    same = greedy_cached(model, src, steps) == greedy_full_recompute(model, src, steps)
    full, kv, ratio = paired(lambda: greedy_full_recompute(model, src, steps), lambda: greedy_cached(model, src, steps),
                             repeat)
    return {"source_pieces": src.shape[1], "new_tokens": steps, "full_recompute_ms": full * 1000,
            "kv_cache_ms": kv * 1000,
            "speedup": ratio, "same_tokens": same, "goal": GOAL_KV, "met": same and ratio >= GOAL_KV}


def measure(checkpoint: str = "checkpoints/zh-en", threads: int = 1, repeat: int = 7) -> dict:
    """Load time, capture overhead at 32/128/512 source pieces and the KV-cache speed-up, on `threads`
    threads (restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        load_s = timeit(lambda: load_checkpoint(checkpoint), repeat=3)
        hm = load_checkpoint(checkpoint)
        out = {"checkpoint": checkpoint, "threads": threads, "load_ms": load_s * 1000}
        if not hm.cfg.is_encoder_decoder:
            return out
        out["capture"] = [capture_overhead(hm, min(n, hm.cfg.max_len), repeat) for n in SOURCE_PIECES]
        out["kv_cache"] = [kv_speedup(hm, n) for n in (32, 128)]
        return out
    finally:
        torch.set_num_threads(before)


def table(r: dict) -> str:
    lines = [f"{r['checkpoint']}, {r['threads']} thread(s): load {r['load_ms']:.0f} ms (goal < 1000 ms)"]
    for c in r.get("capture", []):
        lines.append(f"source {c['source_pieces']:>3} + target {c['target_pieces']} pieces: forward {c['forward_ms']:7.1f} ms, "
                     f"run_with_cache (every hook) {c['capture_ms']:7.1f} ms, ratio {c['ratio']:.2f}x "
                     f"(goal <= {c['goal']}x: {'met' if c['met'] else 'MISSED'})")
    for k in r.get("kv_cache", []):
        lines.append(f"greedy {k['new_tokens']} tokens, source {k['source_pieces']:>3} pieces: full recompute "
                     f"{k['full_recompute_ms']:.0f} ms, KV cache {k['kv_cache_ms']:.0f} ms, speed-up {k['speedup']:.2f}x, "
                     f"{'same' if k['same_tokens'] else 'DIFFERENT'} tokens (goal >= {k['goal']}x: "
                     f"{'met' if k['met'] else 'MISSED'})")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", default="checkpoints/zh-en")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args()
    r = measure(args.checkpoint, args.threads, args.repeat)
    print(table(r))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
