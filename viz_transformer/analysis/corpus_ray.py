"""Head statistics over a corpus spread over a Ray cluster (`viz-transformer stats --ray [ADDRESS]`): the texts cut
into runs of whole batches, one Ray actor per worker holding the model, each run's statistics weighted by its
sentences and added up at the end. Equal to summaries.corpus_head_stats run here, to the float rounding of the order
its per-batch sums are added in (tests/test_corpus_ray.py). Ray is an optional extra (`pip install .[ray]`), imported
on first use; the local run needs none.

    from viz_transformer.analysis.corpus_ray import head_stats_on_ray
    head_stats_on_ray("checkpoints/zh-en", texts, workers=2)                 # a local Ray of 2 CPUs
    head_stats_on_ray("checkpoints/zh-en", texts, address="ray://head:10001")  # a cluster (the package on each node)
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

import pandas as pd

from viz_transformer.analysis.summaries import STATS, corpus_head_stats

KEYS = ["block", "layer", "head"]
RUNS_PER_WORKER = 4          # runs handed out per worker: a slow run does not hold the others back


def split(texts: Sequence[str], parts: int, batch_size: int) -> list[list[str]]:
    """Consecutive runs of the texts, each a whole number of batches (the last may be shorter), at most `parts`."""
    batches = [list(texts[i:i + batch_size]) for i in range(0, len(texts), batch_size)]
    per = -(-len(batches) // max(1, parts))
    return [sum(batches[i:i + per], []) for i in range(0, len(batches), per)]


def combine(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """corpus_head_stats tables of disjoint runs of one corpus (one model: the same heads in the same order) as the
    table of the whole: each statistic the mean over every sentence, each run's mean weighted by its sentences; a
    statistic a block does not have stays NaN, as in one run."""
    first = tables[0]
    for t in tables[1:]:
        if not t[KEYS].equals(first[KEYS]):
            raise ValueError("the runs' tables list different heads: they are not one model's")
    counts = [int(t["n_sentences"].iloc[0]) for t in tables]
    sums = sum(t[list(STATS)].to_numpy(dtype="float64") * n for t, n in zip(tables, counts))
    out = first[KEYS].copy()
    out[list(STATS)] = sums / sum(counts)
    out["n_sentences"] = sum(counts)
    return out


class _Worker:
    """One Ray worker: the model loaded once, one run of texts at a time."""

    def __init__(self, checkpoint: str):
        import torch
        from viz_transformer.run.capture import load_checkpoint
        torch.set_num_threads(1)                  # one CPU a worker, as Ray counts them
        self.hm = load_checkpoint(checkpoint)

    def stats(self, texts: list[str], batch_size: int) -> pd.DataFrame:
        return corpus_head_stats(self.hm, texts, batch_size=batch_size)


def head_stats_on_ray(checkpoint, texts: Sequence[str], address: Optional[str] = None, workers: int = 2,
                      batch_size: int = 16, progress: Optional[Callable[[int, int], None]] = None) -> pd.DataFrame:
    """corpus_head_stats(load_checkpoint(checkpoint), texts) computed by `workers` Ray actors: on the cluster at
    `address` (its nodes need this package and the checkpoint at the same path), else on a Ray started here with
    `workers` CPUs. progress(done, total) after each run comes back."""
    try:
        import ray
    except ImportError:
        raise ValueError("Ray is not installed here: pip install .[ray] (ray==2.60.0)") from None
    texts = [s for s in (str(x).strip() for x in texts) if s]
    if not texts:
        raise ValueError("the corpus has no sentences: give at least one non-empty line")
    if workers < 1:
        raise ValueError(f"workers must be 1 or more, not {workers}")
    root = str(Path(__file__).resolve().parents[2])
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address or None, num_cpus=None if address else workers, include_dashboard=False,
                     log_to_driver=False, runtime_env=None if address else {"env_vars": {"PYTHONPATH": root}})
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ValueError(f"cannot start or reach Ray at {address or 'this machine'}: "
                             f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    try:
        pool = [ray.remote(num_cpus=1)(_Worker).remote(str(checkpoint)) for _ in range(workers)]
        runs = split(texts, workers * RUNS_PER_WORKER, batch_size)
        pending = {pool[i % workers].stats.remote(run, batch_size): i for i, run in enumerate(runs)}
        tables: dict[int, pd.DataFrame] = {}
        done = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            tables[i] = ray.get(ready[0])
            done += len(runs[i])
            if progress is not None:
                progress(done, len(texts))
        return combine([tables[i] for i in range(len(runs))])
    finally:
        if started:
            ray.shutdown()
