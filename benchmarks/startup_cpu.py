"""The start-up load's cost without a browser: a fresh interpreter per sample runs what a fresh server's first page
waits for (viz_explorer/startup/load.py: the app's imports, the default model, its example run) in its main thread,
and reports the process's CPU seconds from its start to the load's end, the wall seconds of the whole process,
and whether sqlalchemy was imported.

    python -m benchmarks.startup_cpu [--repeat 7] [--before /tmp/old-main]

The thread policy is the app's own (OMP_NUM_THREADS and VIZ_THREADS taken out, as benchmarks/cold_start.py does).
--before: another checkout, its samples alternating with this one's. CPU seconds move less with a busy machine's
load than the browser-timed cold start does (benchmarks/cold_start.py), so a change of a tenth of a second shows.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = """import sys, time
from viz_explorer.server import threads
threads.apply()
import streamlit  # noqa: F401  (app.py's first import)
from viz_explorer.startup import load
load.load()
print(time.process_time(), "sqlalchemy" in sys.modules)
"""


def sample(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "VIZ_THREADS")}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    return {"cpu_s": float(out[0]), "wall_s": time.perf_counter() - t0, "sqlalchemy": out[1] == "True"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--before", help="another checkout, alternated with this one")
    p.add_argument("--json", help="also write the samples here")
    a = p.parse_args(argv)
    trees = ({"before": Path(a.before).resolve()} if a.before else {}) | {"now": ROOT}
    got: dict[str, list[dict]] = {k: [] for k in trees}
    for _ in range(a.repeat):
        for side, root in trees.items():
            got[side].append(sample(root))
    for side, rows in got.items():
        print(f"{side:6s} ({trees[side]}): CPU median {statistics.median(r['cpu_s'] for r in rows):.3f} s "
              f"({', '.join(format(r['cpu_s'], '.2f') for r in rows)}), wall median "
              f"{statistics.median(r['wall_s'] for r in rows):.3f} s, sqlalchemy imported: "
              f"{sorted({r['sqlalchemy'] for r in rows})}")
    if a.json:
        Path(a.json).write_text(json.dumps(got, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
