"""The long-text run goal (ours within 2x Hugging Face's time, peak <= 6 GB): a long text on a Qwen2.5-0.5B-sized
model (benchmarks/bench_pages_hf's random folder).
Each measurement runs in a fresh process, one after the other on the same text, so that each has its own peak
RSS (Hugging Face with output_attentions holds 24 x 14 x 2048^2 x 4 B = 5.6 GB of patterns, over the 8 GB a
process may take here beside ours):
  hf     transformers' eager forward with output_attentions=True (the reference: goal, ours <= 2x);
  lean   hm.run(text, names_filter=shown_captures, lean=True), what the app runs: the greedy continuation (64
         pieces) and the capture, the prompt read once (run/lean_once.py);
  twice  the same run with the prompt read twice, as before run/lean_once.py (generation's first step, then
         the capture over prompt + output with each block's patterns checked bit for bit);
  full   hm.run(text) then compact_run, what the app ran before (only where it fits: 512 pieces).
Each process sets the C allocator's mmap threshold as the app's server does (server/allocator.py), so its RSS
after the run (`after`) is what the run keeps, as in the server, not freed pages glibc held on to; `peak` is VmHWM.

    python -m benchmarks.bench_long --tokens 512,2048 --pause-training
    python -m benchmarks.bench_long --tokens 2048 --kinds lean --app /tmp/before     # another checkout's library
"""
from __future__ import annotations

import argparse
import gc
import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

FOLDER = Path("/tmp/bench_pages_hf/root/qwen2.5-0.5b-random")
ROOT = Path(__file__).resolve().parent.parent


def rss_mib() -> float:
    """This process's resident memory now (VmRSS), MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
FITS_FULL = 1024            # above this the full capture's scores and patterns (2 x 24 x 14 x T^2 x 4 B) pass 8 GB


def one(kind: str, tokens: int) -> dict:
    """One measurement in this process: seconds and peak RSS (MiB)."""
    import torch
    from viz_explorer.server import allocator
    allocator.fix_mmap_threshold()                  # as the server's memo does before its first run
    from viz_transformer import load_checkpoint
    from benchmarks.texts import text_of
    hm = load_checkpoint(FOLDER)
    loaded = rss_mib()
    text = text_of(hm.tokenizer, tokens + 1, seed=tokens, lang="en")
    from viz_transformer.core.encoding import encode_input
    ids = list(encode_input(hm.tokenizer, hm.cfg, text, reserve=64).prompt)          # what hm.run reads
    row = {"kind": kind, "tokens": tokens, "pieces": len(ids)}
    if kind == "hf":
        from transformers import AutoModelForCausalLM
        del hm
        model = AutoModelForCausalLM.from_pretrained(FOLDER, attn_implementation="eager", dtype=torch.float32).eval()
        t, cpu = time.perf_counter(), time.process_time()
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
        row["seconds"], row["cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
        row["patterns_mib"] = sum(a.nbytes for a in out.attentions) / 2**20
    else:
        from viz_transformer.run.derived_cache import compact_run, shown_captures
        from viz_explorer.server.byte_lru import nbytes
        if kind == "twice":
            import viz_transformer.run.capture as capture
            capture.reads_prompt_once = lambda *a: False
        t, cpu = time.perf_counter(), time.process_time()
        run = compact_run(hm.run(text)) if kind == "full" else hm.run(text, names_filter=shown_captures, lean=True)
        row["seconds"], row["cpu_s"] = time.perf_counter() - t, time.process_time() - cpu
        row["kept_mib"] = nbytes(run) / 2**20
        row["generated"] = len(run.output_ids)
        gc.collect()
        row["loaded_mib"], row["after_mib"] = loaded, rss_mib()
        t = time.perf_counter()
        run.cache["decoder.11.self_attn.hook_pattern"]
        row["pattern_read_s"] = time.perf_counter() - t
    row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="512,2048")
    p.add_argument("--kinds", default="hf,lean,twice,full", help="which runs (full only where it fits)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pause-training", action="store_true", help="SIGSTOP `viz_transformer train` while timing")
    p.add_argument("--app", default=str(ROOT), help="the checkout whose library is measured (e.g. a git archive)")
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(one(a.one, int(a.tokens))), flush=True)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))       # so the training is continued on a kill too
    from benchmarks.bench_pages_hf import PausedTraining, hf_root
    hf_root(FOLDER.parent.parent)
    rows = []
    env = {"OMP_NUM_THREADS": str(a.threads), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(a.app).resolve())}
    with PausedTraining(a.pause_training):
        for tokens in [int(t) for t in a.tokens.split(",")]:
            for kind in [k for k in a.kinds.split(",") if k != "full" or tokens <= FITS_FULL]:
                out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one", kind, "--tokens",
                                      str(tokens)], capture_output=True, text=True, env=env, cwd=a.app)
                if out.returncode:
                    print(out.stderr[-2000:])
                    continue
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(rows[-1], flush=True)
    print("\n| pieces | what | seconds | ratio to HF | CPU seconds | CPU ratio | peak RSS | RSS after | kept |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        hf = next((x for x in rows if x["kind"] == "hf" and x["tokens"] == r["tokens"]), None)
        kept = f"{r['kept_mib']:.0f} MiB" if "kept_mib" in r else f"patterns {r['patterns_mib']:.0f} MiB"
        after = f"{r['after_mib']:.0f} MiB" if "after_mib" in r else "–"
        ratio, cpu = (f"{r['seconds'] / hf['seconds']:.2f}", f"{r['cpu_s'] / hf['cpu_s']:.2f}") if hf else ("–", "–")
        print(f"| {r['pieces']} | {r['kind']} | {r['seconds']:.1f} s | {ratio} | {r['cpu_s']:.1f} s | {cpu} | "
              f"{r['peak_rss_mib']:.0f} MiB | {after} | {kept} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
