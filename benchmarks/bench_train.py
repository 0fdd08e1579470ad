"""The training step before and after the faster path (`--fast`), measured side by side in one run.

    python -m benchmarks.bench_train [--arch encoder_decoder] [--steps 40] [--threads 2] [--json PATH]

The reference zh-en setup (8k vocabulary, d_model 256, 8 heads, d_ff 1024, dropout 0.15, batch 64,
3+3 layers, or 0+7 for decoder_only / prefix_lm): the training split of seed 1234 is encoded and
batched exactly as `train` does, once with `--no-fast` (the step as before: pools of 50 batches sorted
by source length, logits at every position, AdamW's for-loop kernel) and once as now. Each variant
trains its own copy of the same initial weights on the first --steps batches of its epoch 1; the
steps alternate (old, new, old, new, ...) so a load change on a shared machine hits both. With
--threads 1,2 every (variant, thread count) pair takes its turn in the same rotation.

Steps/s compare steps; real tokens/s (target tokens scored by the loss, not padding) compare work,
since the two variants batch different sentences together. The whole epoch's padding is counted
exactly (no timing): `fill` = real / padded positions the model computes (source + decoder input).
The JSON keeps one entry per architecture (with its command and the machine's load average), so a
run of one architecture leaves the others' numbers in place.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

import viz_transformer.training.train as T
from viz_transformer.training import step as S
from viz_transformer.training.tasks import translation_batches
from viz_transformer.training import data as D
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import Transformer
from viz_transformer.core.tokenizer import Tokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "zh-en" / "tatoeba-cmn-eng.tsv"
RESULTS = Path(__file__).resolve().parent / "results" / "bench_train.json"
REFERENCE = dict(d_model=256, n_heads=8, d_ff=1024, dropout=0.15, max_len=512)


def epoch_fill(enc, batches, arch: str) -> float:
    """Real / computed positions over an epoch's batches (encoder input + decoder input)."""
    real = padded = 0
    for b in batches:
        lens = [[len(enc[i][0])] + ([len(enc[i][1]) - 1] if arch == "encoder_decoder" else []) for i in b]
        if arch != "encoder_decoder":
            lens = [[n - 1] for (n,) in lens]
        real += sum(map(sum, lens))
        padded += len(b) * sum(max(col) for col in zip(*lens))
    return real / padded


def bench_arch(arch: str, tok, items, threads: list[int], steps: int, seed: int, warmup: int = 2) -> dict:
    kw = dict(REFERENCE, architecture=arch, vocab_size=tok.vocab_size, pad_id=tok.pad_id, bos_id=tok.bos_id,
              eos_id=tok.eos_id, n_encoder_layers=3 if arch == "encoder_decoder" else 0,
              n_decoder_layers=3 if arch == "encoder_decoder" else 7)
    if arch != "encoder_decoder":
        kw["sep_id"] = tok.sep_id
    cfg = ModelConfig(**kw)
    enc = S.encode_translation(tok, items, arch, T.TrainConfig.max_tokens)
    torch.manual_seed(seed)
    init = Transformer(cfg)
    runs = []
    for n_threads in threads:
        for fast in (False, True):
            tc = T.TrainConfig(task="translation", batch_size=64, lr=7e-4, warmup=400, seed=seed, fast=fast)
            model = copy.deepcopy(init).train()
            batches = translation_batches(enc, tc.batch_size, tc.seed, fast=fast)    # epoch 1's order
            runs.append(dict(name=f"{'new' if fast else 'old'}@{n_threads}", fast=fast, threads=n_threads, tc=tc,
                             model=model, opt=S.make_optimizer(model, tc), batches=batches, i=0, times=[], real=0,
                             fill=epoch_fill(enc, batches, arch)))

    def step(r, timed: bool) -> None:
        torch.set_num_threads(r["threads"])
        batch = r["batches"][r["i"]]
        t0 = time.perf_counter()
        x, tgt, pl, y = S.translation_inputs(enc, batch, arch, tok.pad_id)
        for g in r["opt"].param_groups:
            g["lr"] = S.lr_at(r["i"], r["tc"], 10_000)
        loss = S.train_step(r["model"], r["opt"], r["tc"], x, y, tok.pad_id, tgt, pl)
        loss.item()                                   # the loop reads it every step (the progress bar)
        dt = time.perf_counter() - t0
        r["i"] += 1
        if timed:
            r["times"].append(dt)
            r["real"] += int((y != tok.pad_id).sum())

    for _ in range(warmup):
        for r in runs:
            step(r, timed=False)
    for _ in range(steps):
        for r in runs:
            step(r, timed=True)
    out = {"n_params": sum(p.numel() for p in init.parameters()), "train_items": len(enc), "variants": {}}
    for r in runs:
        secs = sum(r["times"])
        out["variants"][r["name"]] = {
            "fast": r["fast"], "threads": r["threads"], "steps": len(r["times"]), "seconds": round(secs, 2),
            "steps_per_s": round(len(r["times"]) / secs, 3), "real_tokens_per_s": round(r["real"] / secs, 1),
            "median_step_ms": round(1e3 * statistics.median(r["times"]), 1), "epoch_fill": round(r["fill"], 4)}
    v = out["variants"]
    out["ratios"] = {f"@{n}": {"steps_per_s": round(v[f"new@{n}"]["steps_per_s"] / v[f"old@{n}"]["steps_per_s"], 3),
                               "real_tokens_per_s": round(v[f"new@{n}"]["real_tokens_per_s"]
                                                          / v[f"old@{n}"]["real_tokens_per_s"], 3)}
                     for n in threads}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--arch", default="encoder_decoder", help="comma-separated: encoder_decoder,decoder_only,prefix_lm")
    p.add_argument("--steps", type=int, default=40, help="timed steps per variant (after 2 untimed)")
    p.add_argument("--threads", default="2", help="comma-separated thread counts, e.g. 1,2")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--json", default=str(RESULTS))
    a = p.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",")]
    t0 = time.perf_counter()
    pairs = D.read_pairs(a.data)
    items, _, _ = D.split_by_source(pairs, a.seed, 1500, 1000)      # train's split of the reference run
    tok = Tokenizer.train([s for s, _ in items] + [t for _, t in items], 8000, sep=True)
    print(f"{len(items)} training pairs, tokenizer in {time.perf_counter() - t0:.0f} s")
    command = "python -m benchmarks.bench_train " + " ".join(sys.argv[1:] if argv is None else argv)
    out = Path(a.json) if a.json else None
    result = json.loads(out.read_text()) if out and out.exists() else {}    # other architectures' runs stay
    result.setdefault("archs", {})
    for arch in a.arch.split(","):
        t, load = time.perf_counter(), os.getloadavg()
        r = bench_arch(arch, tok, items, threads, a.steps, a.seed)
        result["archs"][arch] = {"command": command, "torch": torch.__version__, "cpu_count": os.cpu_count(),
                                 "machine": platform.machine(), "load_before": load, "load_after": os.getloadavg(),
                                 "measured_at": time.strftime("%Y-%m-%d %H:%M"), **r}
        print(f"\n{arch} ({r['n_params'] / 1e6:.2f}M parameters, {r['train_items']} items, "
              f"{time.perf_counter() - t:.0f} s)")
        for name, v in r["variants"].items():
            print(f"  {name:6s} {v['steps_per_s']:6.3f} steps/s  {v['real_tokens_per_s']:7.0f} real tokens/s  "
                  f"median step {v['median_step_ms']:6.0f} ms  epoch fill {v['epoch_fill']:.1%}")
        for n, q in r["ratios"].items():
            print(f"  new/old {n}: steps/s ×{q['steps_per_s']:.2f}, real tokens/s ×{q['real_tokens_per_s']:.2f}")
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
