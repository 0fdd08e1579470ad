"""Loading a shipped checkpoint (viz_transformer.load_checkpoint: the checks, the weights, the tokenizer), as the
sidebar's model switch and Compare architectures (three per text) do: milliseconds per load, one torch thread.

    python -m benchmarks.load_time [--rounds 5] [--before /tmp/old-main]

Each round is a fresh interpreter per checkout that loads every checkpoint once to warm up (imports, the file
cache), then times LOADS loads of each; a round's number is their median, the result the median over rounds.
--before: another checkout (a clone of the old main), its rounds alternating with this one's, so both see the
same machine load; the ratio is printed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("zh-en", "zh-en-postnorm", "zh-en-decoder", "zh-en-prefix", "en-stories")
LOADS = 5
PROBE = """import json, statistics, sys, time, torch
torch.set_num_threads(1)
from pathlib import Path
from viz_transformer import load_checkpoint
out = {}
for name in sys.argv[2:]:
    load_checkpoint(Path(sys.argv[1]) / name)
for name in sys.argv[2:]:
    ts = []
    for _ in range(%d):
        t0 = time.perf_counter(); load_checkpoint(Path(sys.argv[1]) / name); ts.append(time.perf_counter() - t0)
    out[name] = statistics.median(ts)
print(json.dumps(out))
""" % LOADS


def one_round(checkout: Path, names) -> dict:
    """{name: seconds} from a fresh interpreter in `checkout`, loading ROOT's checkpoints (the same files)."""
    r = subprocess.run([sys.executable, "-c", PROBE, str(ROOT / "checkpoints"), *names], cwd=checkout,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--before", help="another checkout: its rounds alternate with this one's")
    p.add_argument("--checkpoint", nargs="*", default=list(NAMES))
    a = p.parse_args(argv)
    sides = {"after": ROOT} if not a.before else {"before": Path(a.before).resolve(), "after": ROOT}
    got = {side: [] for side in sides}
    for _ in range(a.rounds):
        for side, checkout in sides.items():
            got[side].append(one_round(checkout, a.checkpoint))
    med = {side: {n: statistics.median(r[n] for r in rounds) for n in a.checkpoint} for side, rounds in got.items()}
    print(f"{'checkpoint':16}" + "".join(f"{side:>10}" for side in sides) + ("     ratio" if a.before else ""))
    for n in a.checkpoint:
        row = f"{n:16}" + "".join(f"{med[side][n] * 1000:8.1f}ms" for side in sides)
        if a.before:
            row += f"  {med['after'][n] / med['before'][n]:8.2f}"
        print(row)


if __name__ == "__main__":
    main()
