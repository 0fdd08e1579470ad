"""float32 against bfloat16 weights (bfloat16 is offered to halve the weights' memory), on one random checkpoint of
ours (default: 6 + 6 layers, d_model 512, 8 heads, FFN 2048, a 400-piece vocabulary): the weights' bytes, the
process's RSS after loading, and the median time of a full capture (every hook) at --tokens source pieces.
Prints one line per dtype, and the device "auto" chose. The weights' bytes are the measure: the RSS of the second
load reuses pages the first one freed, so it reads low.

    python -m benchmarks.bench_dtype --rounds 3
"""
from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
from benchmarks.procfs import rss_mib

from viz_transformer import load_checkpoint, save_checkpoint
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import Transformer
from viz_transformer.core.tokenizer import Tokenizer
from viz_transformer.run.capture import pick_device, weight_bytes




def make(folder: Path, layers: int, d: int) -> Path:
    texts = [f"我是第{i}个句子。This is sentence number {i}." for i in range(400)]
    tok = Tokenizer.train(texts, 400)
    cfg = ModelConfig(vocab_size=tok.vocab_size, d_model=d, n_heads=8, n_encoder_layers=layers, n_decoder_layers=layers,
                      d_ff=4 * d, dropout=0.0, max_len=512, pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id)
    return save_checkpoint(folder, Transformer(cfg), tok, {"task": "benchmark"}, fp16=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"device auto -> {pick_device('auto')}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = make(Path(tmp) / "m", args.layers, args.d_model)
        text = "我是学生。" * (args.tokens // 4)
        for dtype in ("float32", "bfloat16"):
            gc.collect()
            before = rss_mib()
            hm = load_checkpoint(folder, dtype=dtype)
            after = rss_mib()
            hm.run(text, max_new_tokens=4)                        # warm-up
            times = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                hm.run(text, max_new_tokens=4)
                times.append(time.perf_counter() - t0)
            print(f"{dtype:9s} weights {weight_bytes(hm.model) / 2**20:8.1f} MiB  RSS +{after - before:7.1f} MB  "
                  f"capture (4 new tokens) median {statistics.median(times):.3f} s")
            del hm


if __name__ == "__main__":
    main()
