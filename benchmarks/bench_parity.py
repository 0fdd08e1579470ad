"""The parity check's time (run/parity.py: `viz-transformer check FOLDER`, the Overview's "Check against
transformers") on a random BERT-base-sized folder (110M parameters) and a Qwen2.5-0.5B-sized one (494M), against
its floor measured in the same run: transformers alone loading the folder and running the same five texts
(with attentions). The check adds our own five runs and the comparisons.

    python -m benchmarks.bench_parity [--work /tmp/bench_hf] [--models bert qwen2]

Builds the folders once under --work (bench_hf and bert_base make them; about 2.4 GB).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch


def folder_for(model: str, work: Path) -> Path:
    if model == "bert":
        from benchmarks.bert_base import NAME, bert_root
        return bert_root(work) / NAME
    from benchmarks.bench_hf import make_folder
    return make_folder(work)


def floor_seconds(hm, folder: Path) -> float:
    """transformers alone: from_pretrained, then the five texts' forwards (our ids, attentions out)."""
    import transformers as tf
    from viz_transformer.run import parity
    start = time.perf_counter()
    cfg = hm.cfg
    auto = (tf.AutoModelForMaskedLM if cfg.head == "mlm" else tf.AutoModel) if cfg.is_encoder_only \
        else tf.AutoModelForCausalLM
    model = auto.from_pretrained(str(folder), attn_implementation="eager", dtype=torch.float32).eval()
    with torch.no_grad():
        for text in parity.TEXTS:
            ids = hm.tokenizer.encode(text)
            model(torch.tensor([ids]), output_attentions=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/bench_hf")
    ap.add_argument("--models", nargs="+", choices=("bert", "qwen2"), default=["bert", "qwen2"])
    ap.add_argument("--json", help="write the numbers here too")
    a = ap.parse_args()
    from viz_transformer import load_checkpoint
    from viz_transformer.run import parity
    out = {}
    for name in a.models:
        folder = folder_for(name, Path(a.work))
        hm = load_checkpoint(folder)
        floor = floor_seconds(hm, folder)
        start = time.perf_counter()
        report = parity.check(hm)
        took = time.perf_counter() - start
        out[name] = {"parameters": parity.n_params(hm), "check_s": round(took, 2), "floor_s": round(floor, 2),
                     "ratio": round(took / floor, 2), "estimate_s": round(parity.estimate_seconds(hm), 1),
                     "verdict": parity.summary(report)}
        print(f"{name}: {out[name]['parameters'] / 1e6:.0f}M parameters, check {took:.1f} s, transformers alone "
              f"{floor:.1f} s ({took / floor:.2f}×), estimate {out[name]['estimate_s']} s; {parity.summary(report)}",
              flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
