"""Corpus work here and on Ray: each kind in this process on 1 and on 2 threads (one torch thread each, the app's
policy; the app runs its corpus jobs on threads.cores() threads), then on a local Ray of 1 and of 2 workers (one CPU
each; Ray's start and the workers' model loads included, as a user running `--ray` waits for them), on the same
texts; the results checked equal to the first.

    python -m benchmarks.bench_ray                                  # all three kinds on zh-en (sizes below)
    python -m benchmarks.bench_ray --work stats --sentences 2000 --json /tmp/ray.json

Kinds (--work): stats (head statistics over --sentences, the built-in corpus repeated), attribution (attention
against attribution over --attribution-sentences, every output step), evaluate (greedy translations and their BLEU
over --evaluate-sentences).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _texts(pool: list[str], n: int) -> list[str]:
    return (pool * (n // len(pool) + 1))[:n]


def kinds(a, hm) -> dict:
    """{kind: (texts, here(texts), on_ray(texts, workers), difference(here's result, Ray's))}."""
    import pandas as pd
    from viz_transformer.analysis.attribution import corpus_taus
    from viz_transformer.analysis.corpus_ray import head_stats_on_ray, taus_on_ray
    from viz_transformer.analysis.summaries import STATS, corpus_head_stats
    from viz_transformer.training import corpora, evaluation
    pool = corpora.load(corpora.for_model(hm.cfg))
    stats = lambda x, y: float(np.nanmax(np.abs(x[list(STATS)].to_numpy() - y[list(STATS)].to_numpy())))  # noqa: E731
    taus = lambda x, y: float(np.nanmax(np.abs(x["tau"].to_numpy() - y["tau"].to_numpy())))  # noqa: E731

    def scored(texts, translate=None):
        pairs = [(s, "I am an engineer.") for s in texts]          # the references do not change the work
        return evaluation.evaluate_translators([hm], pairs=pairs, translate=translate)[0]
    return {
        "stats": (_texts(pool, a.sentences), lambda t, w: corpus_head_stats(hm, t, workers=w),
                  lambda t, n: head_stats_on_ray(a.checkpoint, t, workers=n), stats),
        "attribution": (_texts(pool, a.attribution_sentences),
                        lambda t, w: corpus_taus(hm, t, per_layer=True, workers=w),
                        lambda t, n: taus_on_ray(a.checkpoint, t, workers=n, per_layer=True),
                        lambda x, y: taus(x, y) if len(x) == len(y) and pd.Series(x["method"]).equals(
                            pd.Series(y["method"])) else float("inf")),
        "evaluate": (_texts(pool, a.evaluate_sentences), lambda t, w: scored(t) if w == 1 else None,
                     lambda t, n: scored(t, evaluation.on_ray(None, n)[0]),
                     lambda x, y: 0.0 if x == y else float("inf")),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "zh-en"))
    p.add_argument("--work", default="stats,attribution,evaluate")
    p.add_argument("--sentences", type=int, default=1000, help="stats")
    p.add_argument("--attribution-sentences", type=int, default=40)
    p.add_argument("--evaluate-sentences", type=int, default=2000)
    p.add_argument("--workers", default="1,2", help="Ray workers to time ('' for none)")
    p.add_argument("--threads", default="1,2", help="threads here (each its own sentences; the app uses threads.cores())")
    p.add_argument("--json")
    a = p.parse_args(argv)
    import torch
    from viz_transformer import load_checkpoint
    torch.set_num_threads(1)
    hm = load_checkpoint(a.checkpoint)
    work = kinds(a, hm)
    out = {}
    for kind in a.work.split(","):
        texts, here, on_ray, difference = work[kind]
        rows, local = [], None
        for w in [int(x) for x in a.threads.split(",")]:
            t0 = time.perf_counter()
            got = here(texts, w)                             # None: this kind runs on one thread only
            if got is None:
                continue
            s = time.perf_counter() - t0
            diff = 0.0 if local is None else difference(local, got)
            local = got if local is None else local
            rows.append({"how": f"here, {w} thread{'s' if w > 1 else ''}", "seconds": s, "max_difference": diff})
            print(f"{kind}: {len(texts)} sentences on {Path(a.checkpoint).name}: here, {w} thread(s) {s:.1f} s"
                  f" (largest difference {diff:.1e})", flush=True)
        for n in [int(x) for x in a.workers.split(",") if x]:
            t0 = time.perf_counter()
            got = on_ray(texts, n)
            s = time.perf_counter() - t0
            diff = difference(local, got)
            rows.append({"how": f"Ray, {n} worker{'s' if n > 1 else ''}", "seconds": s, "max_difference": diff})
            print(f"  Ray, {n} worker(s): {s:.1f} s ({rows[0]['seconds'] / s:.2f}× here; largest difference "
                  f"{diff:.1e})", flush=True)
        out[kind] = {"sentences": len(texts), "rows": rows}
    if a.json:
        Path(a.json).write_text(json.dumps({"checkpoint": a.checkpoint, **out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
