"""CPU seconds of the Head statistics page's computation on a long text: every head's statistics and
attention-sink shares of a lean run (patterns recomputed on read) of the random Qwen2.5-0.5B-sized folder that
benchmarks/bench_pages_hf builds (24 layers x 14 heads, 2 KV heads), at one torch thread, under cProfile with
process CPU time as its clock; the model's run itself is not counted. Then its wall time without the profiler, one
layer at a time and with as many layers at once as the page reads (threads.cores(), where the tree has it). The C allocator is set as the server sets it
(allocator.fix_mmap_threshold: every tensor of 1 MiB or more on fresh pages), and the computation runs under
allocator.scratch where the tree has it, as cached.head_tables runs it.

    python -m benchmarks.head_stats_cpu --tokens 512,2048 [--before /tmp/old-main] [--now /tmp/new] [--top 12]

--before: another checkout (e.g. `git archive` of main), its library on PYTHONPATH in a process of its own, on the
same text (made here); --now: the checkout timed as "now" (default this one; a frozen copy where others edit it). The computation timed is the page's: summaries.head_tables where the tree has it (one pass
per layer for both tables), else summaries.head_stats and sinks.sink_shares per block (a pass each).
Pause the training while timing (touch /root/viz-runs/PAUSE); a 2,048-piece run of the folder needs about 5 GB.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = Path("/tmp/bench_pages_hf")
NAME = "qwen2.5-0.5b-random"


def measure(text_file: str, top: int, repeat: int) -> dict:
    """In this process (the library first on sys.path is the one timed): the run, then the page's computation
    `repeat` times under cProfile. {"cpu_s": [each time's total], "pieces": n, "top": [[function, cumulative s]
    of the first time, ...]}."""
    import cProfile
    import importlib
    import pstats
    import time

    import torch
    torch.set_num_threads(1)
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import sinks, summaries
    from viz_transformer.core.hook_names import available_blocks, n_layers
    from viz_transformer.run.derived_cache import shown_captures
    from viz_explorer.server import allocator
    allocator.fix_mmap_threshold()            # as the server's memo does: tensors of 1 MiB and more get their own pages
    scratch = getattr(allocator, "scratch", contextlib.nullcontext)     # what cached.head_tables runs it under
    hm = load_checkpoint(WORK / "root" / NAME)
    run = hm.run(Path(text_file).read_text(encoding="utf-8"), names_filter=shown_captures, lean=True)

    def page():
        with scratch():
            if hasattr(summaries, "head_tables"):
                return summaries.head_tables(run)
            return summaries.head_stats(run), [sinks.sink_shares(run.cache, b, n_layers(hm.cfg, b))
                                               for b in available_blocks(hm.cfg)]

    cpu, prof = [], None
    for _ in range(repeat):                   # the profile of the first; the others for the spread
        prof_i = cProfile.Profile(time.process_time)
        t0 = time.process_time()
        prof_i.runcall(page)
        cpu.append(round(time.process_time() - t0, 3))
        prof = prof or prof_i
    stats = pstats.Stats(prof)
    rows = sorted(((f"{Path(f).name}:{line}({fn})", st[3]) for (f, line, fn), st in stats.stats.items()),
                  key=lambda r: -r[1])[:top]
    wall = {}                                 # wall seconds, no profiler: one layer at a time, and as the page reads them
    threads = getattr(importlib.import_module("viz_explorer.server.threads"), "cores", None)
    for workers in dict.fromkeys([1, threads() if threads else 1]):
        if workers > 1 or hasattr(summaries, "head_tables"):
            kw = {"workers": workers} if workers > 1 else {}
            wall[workers] = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                with scratch():
                    summaries.head_tables(run, **kw) if kw else page()
                wall[workers].append(round(time.perf_counter() - t0, 3))
    return {"cpu_s": cpu, "wall_s": wall, "pieces": len(run.tgt_pieces), "top": [[n, round(s, 3)] for n, s in rows]}


def in_tree(root: Path, text_file: str, top: int, repeat: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "VIZ_THREADS")}
    env |= {"PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, __file__, "--measure", text_file, str(top), str(repeat)], cwd="/tmp", env=env,
                         capture_output=True, text=True, timeout=3600)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        print(json.dumps(measure(argv[1], int(argv[2]), int(argv[3]))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="512,2048")
    p.add_argument("--before", help="another checkout, timed on the same texts")
    p.add_argument("--now", default=str(ROOT), help="the checkout timed as now (default: this one)")
    p.add_argument("--repeat", type=int, default=3, help="times the computation runs in each process")
    p.add_argument("--top", type=int, default=12, help="how many functions of the profile to print (cumulative)")
    a = p.parse_args(argv)
    from benchmarks.bench_pages_hf import hf_root
    from benchmarks.texts import text_of
    from viz_transformer import load_checkpoint
    tok = load_checkpoint(hf_root(WORK) / NAME).tokenizer
    trees = ({"before": Path(a.before).resolve()} if a.before else {}) | {"now": Path(a.now).resolve()}
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for n in (int(x) for x in a.tokens.split(",")):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            f.write(text_of(tok, n + 1, seed=n, lang="en"))       # bench_pages_hf's text for --tokens n
        try:
            for side, root in trees.items():
                got = in_tree(root, f.name, a.top, a.repeat)
                print(f"\n{side} @{n} ({got['pieces']} pieces): median {statistics.median(got['cpu_s']):.2f} CPU s "
                      f"({', '.join(map(str, got['cpu_s']))}); wall, median: "
                      + ", ".join(f"{statistics.median(v):.2f} s with {w} {'layer' if int(w) == 1 else 'layers'} at once"
                                  for w, v in got.get("wall_s", {}).items()) + "; the first time's profile:")
                for name, s in got["top"]:
                    print(f"  {s:8.3f}  {name}")
        finally:
            os.unlink(f.name)
    print(f"\nload average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
