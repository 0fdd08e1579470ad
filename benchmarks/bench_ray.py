"""Head statistics over a corpus here and on Ray: corpus_head_stats in this process (one torch thread, the app's),
then head_stats_on_ray on a local Ray of 1 and of 2 workers (one CPU each; Ray's start and the workers' model loads
included, as a user running `stats --ray` waits for them), on the same texts; the tables checked equal.

    python -m benchmarks.bench_ray                                  # zh-en, the built-in corpus repeated to 1,000
    python -m benchmarks.bench_ray --checkpoint checkpoints/en-stories --sentences 2000 --json /tmp/ray.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "zh-en"))
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--json")
    a = p.parse_args(argv)
    import torch
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis.corpus_ray import head_stats_on_ray
    from viz_transformer.analysis.summaries import STATS, corpus_head_stats
    from viz_transformer.training import corpora
    torch.set_num_threads(1)
    hm = load_checkpoint(a.checkpoint)
    pool = corpora.load(corpora.for_model(hm.cfg))
    texts = (pool * (a.sentences // len(pool) + 1))[:a.sentences]
    t0 = time.perf_counter()
    local = corpus_head_stats(hm, texts)
    rows = [{"how": "here, 1 thread", "seconds": time.perf_counter() - t0}]
    print(f"{len(texts)} sentences on {Path(a.checkpoint).name}: here {rows[0]['seconds']:.1f} s", flush=True)
    for n in [int(x) for x in a.workers.split(",")]:
        t0 = time.perf_counter()
        got = head_stats_on_ray(a.checkpoint, texts, workers=n)
        s = time.perf_counter() - t0
        diff = float(np.nanmax(np.abs(got[list(STATS)].to_numpy() - local[list(STATS)].to_numpy())))
        rows.append({"how": f"Ray, {n} worker{'s' if n > 1 else ''}", "seconds": s, "max_difference": diff})
        print(f"  Ray, {n} worker(s): {s:.1f} s ({rows[0]['seconds'] / s:.2f}× here; largest difference {diff:.1e})",
              flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"sentences": len(texts), "checkpoint": a.checkpoint, "rows": rows},
                                           indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
