"""Benchmark: what the attention page sends to the browser for a 512-token text.

    python -m benchmarks.bench_figures [--checkpoint checkpoints/zh-en] [--tokens 510]

BertViz ships every attention value as JSON and falls over near 512 tokens. Our model view
max-pools each head to a small tile and the single-head heatmap ships one [q, k] matrix as a
typed array. This prints figure sizes and build times, and the ratio against the naive payload
(every layer × head × q × k value as JSON text), measured in one run.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from viz_transformer import load_checkpoint
from viz_transformer.analysis import patterns
from viz_transformer.plots import heatmaps


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", default="checkpoints/zh-en")
    p.add_argument("--tokens", type=int, default=510)
    args = p.parse_args()
    torch.set_num_threads(1)
    hm = load_checkpoint(args.checkpoint)
    text = "我是一名工程师，我喜欢我的工作。" * 200
    t = time.perf_counter()
    run = hm.run(text[: args.tokens * 2], target="I am an engineer." if hm.cfg.is_encoder_decoder else None)
    capture_s = time.perf_counter() - t
    part = "encoder" if hm.cfg.is_encoder_decoder else "decoder"
    pats = run.cache.stack("self_attn.hook_pattern", part=part)          # [layer, head, q, k]
    L, H, Q, K = pats.shape
    pieces = run.pieces(part)
    print(f"{Q} tokens, {L} layers x {H} heads; capture {capture_s:.2f} s (cut {run.n_cut} pieces)")

    naive = len(json.dumps(pats.tolist()))
    t = time.perf_counter()
    head_fig = heatmaps.attention_heatmap(pats[0, 0], pieces, pieces, "head")
    head_bytes = len(head_fig.to_json())
    head_s = time.perf_counter() - t
    t = time.perf_counter()
    grid_fig = heatmaps.model_view(patterns.model_view_tiles(pats), "model view")
    grid_bytes = len(grid_fig.to_json())
    grid_s = time.perf_counter() - t
    print(f"naive payload (all values as JSON): {naive / 1e6:8.2f} MB")
    print(f"single-head heatmap:               {head_bytes / 1e6:8.2f} MB, built in {head_s:.2f} s")
    print(f"model view (max-pooled tiles):     {grid_bytes / 1e6:8.2f} MB, built in {grid_s:.2f} s")
    print(f"ratio naive / (heatmap + model view): {naive / (head_bytes + grid_bytes):.1f}x smaller")


if __name__ == "__main__":
    main()
