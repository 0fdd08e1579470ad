"""How many intra-op threads the app's model runs should use (the policy: viz_explorer/server/threads.py).

    python -m benchmarks.bench_threads [--checkpoint checkpoints/en-stories ...] [--rounds 5] [--json PATH]

Times one model run, `hm.run(text)` on the app's first example text (the sidebar's run: the capture and the
model's continuation), at torch's default intra-op thread count, at 1 and at 2, first on the machine as it is,
then beside one busy-loop process per core (a student's laptop with other work, or the browser and other sessions
beside the server). Prints the median of --rounds per cell and, under each load, each count's time as a ratio
to one thread's. Rounds alternate the thread counts, so a change in the machine's other load hits them alike.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.busy import BusyLoops
from viz_transformer import load_checkpoint
from viz_explorer.server.defaults import EXAMPLES

DEFAULT = torch.get_num_threads()        # torch's own choice in this process (the cores, or OMP_NUM_THREADS)


def measure(hm, text: str, counts: list[int], rounds: int) -> dict[int, float]:
    """Median seconds of one hm.run(text) per thread count, the counts alternating within each round."""
    times = {n: [] for n in counts}
    for n in counts:                        # a warm-up at each count (the thread pool, the allocator)
        torch.set_num_threads(n)
        hm.run(text)
    for _ in range(rounds):
        for n in counts:
            torch.set_num_threads(n)
            t0 = time.perf_counter()
            hm.run(text)
            times[n].append(time.perf_counter() - t0)
    torch.set_num_threads(DEFAULT)
    return {n: statistics.median(ts) for n, ts in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", action="append", help="a checkpoint folder (repeatable; default: en-stories "
                                                          "and zh-en)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="write the numbers here too")
    a = ap.parse_args()
    folders = a.checkpoint or [str(ROOT / "checkpoints" / "en-stories"), str(ROOT / "checkpoints" / "zh-en")]
    counts = sorted({DEFAULT, 1, 2})
    label = {n: f"{n}" + (" (torch's default)" if n == DEFAULT else "") for n in counts}
    print(f"{os.cpu_count()} cores; torch's default: {DEFAULT} threads (OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}); load average before: {os.getloadavg()[0]:.2f}")
    out = {"cores": os.cpu_count(), "default_threads": DEFAULT, "rounds": a.rounds, "runs": []}
    for folder in folders:
        hm = load_checkpoint(folder)
        text = EXAMPLES["translator" if hm.cfg.is_translator else "lm"][0]
        for load in ("as is", "busy"):
            if load == "busy":
                with BusyLoops():
                    got = measure(hm, text, counts, a.rounds)
            else:
                got = measure(hm, text, counts, a.rounds)
            for n in counts:
                ratio = got[n] / got[1]
                print(f"{Path(folder).name:12s} {load:6s} threads {label[n]:22s} {got[n]:7.3f} s   "
                      f"x{ratio:5.2f} one thread's")
                out["runs"].append({"checkpoint": Path(folder).name, "load": load, "threads": n,
                                    "seconds": round(got[n], 4), "ratio_to_1": round(ratio, 3)})
        by = {(r["load"], r["threads"]): r["seconds"] for r in out["runs"] if r["checkpoint"] == Path(folder).name}
        print(f"{Path(folder).name:12s} busy / as is: " + ", ".join(
            f"{n} threads x{by['busy', n] / by['as is', n]:.2f}" for n in counts))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
