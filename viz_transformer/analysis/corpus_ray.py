"""Corpus views spread over Ray (run/ray_pool.py): head statistics (`stats --ray`), the runs of whole batches
combined into the whole corpus's table, each run's statistics weighted by its sentences; and attention against
attribution (`attribution --ray`), each sentence's rows as it gives them alone. Each equal to its local function
(summaries.corpus_head_stats, attribution.corpus_taus), head statistics to the float rounding of the order the
per-batch sums are added in (tests/test_corpus_ray.py). Ray is an optional extra, imported on first use.

    head_stats_on_ray("checkpoints/zh-en", texts, workers=2)                 # a local Ray of 2 CPUs
    taus_on_ray("checkpoints/zh-en", texts, address="ray://head:10001")      # a cluster (the package on each node)
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import pandas as pd

from viz_transformer.analysis.summaries import CORPUS_BATCH, STATS
from viz_transformer.run.ray_pool import map_runs

KEYS = ["block", "layer", "head"]


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


def head_stats_on_ray(checkpoint, texts: Sequence[str], address: Optional[str] = None, workers: Optional[int] = 2,
                      batch_size: int = CORPUS_BATCH, progress: Optional[Callable[[int, int], None]] = None) -> pd.DataFrame:
    """corpus_head_stats(load_checkpoint(checkpoint), texts) computed by Ray actors (ray_pool.map_runs: `workers`,
    None for every CPU of the cluster at `address`), in runs of whole batches."""
    parts = map_runs(checkpoint, "viz_transformer.analysis.summaries:corpus_head_stats", _sentences(texts), batch_size,
                     address, workers, progress, batch_size=batch_size)
    return combine([table for _, table in parts])


def taus_on_ray(checkpoint, texts: Sequence[str], address: Optional[str] = None, workers: Optional[int] = 2,
                max_steps: Optional[int] = None, progress: Optional[Callable[[int, int], None]] = None,
                layer: Optional[int] = None, per_layer: bool = False) -> pd.DataFrame:
    """attribution.corpus_taus(load_checkpoint(checkpoint), texts, layer=, max_steps=, per_layer=) computed by Ray
    actors (as head_stats_on_ray): each run's rows with its sentences numbered as in the whole corpus."""
    texts = list(texts)
    if not texts:
        raise ValueError("the corpus has no sentences: give at least one non-empty line")
    parts = map_runs(checkpoint, "viz_transformer.analysis.attribution:corpus_taus", texts, 1, address, workers,
                     progress, max_steps=max_steps, per_layer=per_layer, layer=layer)
    starts = [sum(n for n, _ in parts[:i]) for i in range(len(parts))]
    return pd.concat([df.assign(sentence=df["sentence"] + a) for (_, df), a in zip(parts, starts)], ignore_index=True)


def _sentences(texts: Sequence[str]) -> list[str]:
    texts = [s for s in (str(x).strip() for x in texts) if s]
    if not texts:
        raise ValueError("the corpus has no sentences: give at least one non-empty line")
    return texts
