"""Head statistics spread over Ray (viz_transformer/analysis/corpus_ray.py, `stats --ray`): runs of whole batches,
their tables combined into the whole corpus's, equal to corpus_head_stats run here; on a local Ray of 2 CPUs started in
the test; the command's mistakes exit 2 in one line."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from app_util import ROOT
from viz_transformer import load_checkpoint
from viz_transformer.analysis.corpus_ray import combine, head_stats_on_ray, split
from viz_transformer.analysis.summaries import STATS, corpus_head_stats
from viz_transformer.training import corpora

pytestmark = pytest.mark.slow
TEXTS = corpora.load("zh")[:40]


def same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) and a[["block", "layer", "head"]].equals(b[["block", "layer", "head"]])
    np.testing.assert_allclose(a[list(STATS)].to_numpy(), b[list(STATS)].to_numpy(), rtol=1e-12, atol=1e-12)
    assert (a["n_sentences"] == b["n_sentences"]).all()


def test_runs_of_whole_batches_combine_into_the_whole_corpus(ckpt_root):
    runs = split(TEXTS, 3, 16)
    assert sum(runs, []) == TEXTS and all(len(r) % 16 == 0 for r in runs[:-1]) and len(runs) == 3
    hm = load_checkpoint(ckpt_root / "tiny-zh-en")
    whole = corpus_head_stats(hm, TEXTS)
    assert whole[list(STATS)].isna().to_numpy().any()          # statistics a block has not: NaN, kept NaN
    same(combine([corpus_head_stats(hm, r) for r in runs]), whole)


def test_a_local_ray_of_two_workers_gives_the_local_table(ckpt_root):
    pytest.importorskip("ray")
    done = []
    got = head_stats_on_ray(ckpt_root / "tiny-zh-en", TEXTS, workers=2, batch_size=8,
                            progress=lambda d, n: done.append((d, n)))
    same(got, corpus_head_stats(load_checkpoint(ckpt_root / "tiny-zh-en"), TEXTS, batch_size=8))
    assert done[-1] == (len(TEXTS), len(TEXTS)) and len(done) == len(split(TEXTS, 8, 8))


def test_the_command_with_ray_writes_the_local_csv_and_says_its_mistakes(ckpt_root, tmp_path):
    pytest.importorskip("ray")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS[:20]), encoding="utf-8")
    cmd = [sys.executable, "-m", "viz_transformer", "stats", "--checkpoint", str(ckpt_root / "tiny-zh-en"),
           "--corpus", str(corpus), "--quiet"]
    for out, extra in (("local.csv", []), ("ray.csv", ["--ray", "--workers", "2"])):
        r = subprocess.run(cmd + ["--out", str(tmp_path / out)] + extra, capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
        assert r.returncode == 0, r.stderr
    a, b = pd.read_csv(tmp_path / "local.csv"), pd.read_csv(tmp_path / "ray.csv")
    assert list(a.columns) == list(b.columns) and (a["role"].fillna("") == b["role"].fillna("")).all()
    np.testing.assert_allclose(a[list(STATS)].to_numpy(), b[list(STATS)].to_numpy(), rtol=1e-12, atol=1e-12)
    for extra, said in ((["--ray", "--workers", "0"], "workers must be 1 or more"),
                        (["--ray", "ray://127.0.0.1:1", "--workers", "1"], "cannot start or reach Ray")):
        r = subprocess.run(cmd + ["--out", str(tmp_path / "x.csv")] + extra, capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
        assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
