"""Corpus work spread over Ray (viz_transformer/run/ray_pool.py): head statistics (`stats --ray`: runs of whole
batches, their tables combined into the whole corpus's, equal to corpus_head_stats run here), attention against
attribution (`attribution --ray`: the local rows) and evaluate (`evaluate --ray`: the local translations, scores and
perplexity); on a local Ray of 2 CPUs started in the test; the commands' mistakes exit 2 in one line."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from app_util import ROOT
from viz_transformer import load_checkpoint
from viz_transformer.analysis.attribution import corpus_taus
from viz_transformer.analysis.corpus_ray import combine, head_stats_on_ray, taus_on_ray
from viz_transformer.analysis.summaries import STATS, corpus_head_stats
from viz_transformer.run import ray_pool
from viz_transformer.run.ray_pool import split
from viz_transformer.training import corpora, evaluation
from viz_transformer.training import data as D

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


# -- attention against attribution, and evaluate, on Ray (run/ray_pool.py) -------------------------------------------
@pytest.fixture(scope="module")
def local_ray():
    """One local Ray of 2 CPUs for the tests below: map_runs uses a Ray it finds started and leaves it running."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield
    ray.shutdown()


def test_runs_are_whole_units_in_order_and_only_this_package_is_called():
    items = list(range(150))
    runs = ray_pool.split(items, 8, 64)
    assert sum(runs, []) == items and [len(r) for r in runs] == [64, 64, 22]
    assert ray_pool.split(items[:5], 8) == [[0], [1], [2], [3], [4]]
    assert ray_pool.function("viz_transformer.training.evaluation:lm_nll") is evaluation.lm_nll
    with pytest.raises(ValueError, match="not a function of this package"):
        ray_pool.function("os:system")


def test_attention_against_attribution_on_ray_gives_the_local_rows(ckpt_root, local_ray):
    texts = TEXTS[:6]
    local = corpus_taus(load_checkpoint(ckpt_root / "tiny-zh-en"), texts, max_steps=2, per_layer=True)
    got = taus_on_ray(ckpt_root / "tiny-zh-en", texts, workers=2, max_steps=2, per_layer=True)
    assert sorted(got["sentence"].unique()) == list(range(len(texts)))
    pd.testing.assert_frame_equal(got, local)                       # each sentence alone: the same numbers


def test_evaluate_on_ray_scores_what_the_local_run_scores(local_ray):
    zh = load_checkpoint(ROOT / "checkpoints" / "zh-en")
    sources = corpora.load("zh")[:150]                               # three greedy batches: 64, 64, 22
    translate, nll = evaluation.on_ray(None, 2)
    here = evaluation.translations(zh, sources)
    assert translate(zh, sources) == here
    pairs = list(zip(sources, here[::-1]))                          # references: any text, the same on both sides
    assert (evaluation.evaluate_translators([zh], pairs=pairs, translate=translate)
            == evaluation.evaluate_translators([zh], pairs=pairs))
    lm = load_checkpoint(ROOT / "checkpoints" / "en-stories")
    stories = [" ".join(corpora.load("en")[i:i + 20]) for i in range(0, 250, 20)] * 2
    blocks = D.blocks(D.token_stream(stories, lm.tokenizer), lm.meta.get("train_config", {}).get("block_size", 256))
    assert len(blocks) > 16                                          # more than one batch of blocks
    parts = nll(lm, blocks)
    whole = evaluation.lm_nll(lm, blocks)
    assert sum(n for _, n in parts) == whole[1] and sum(x for x, _ in parts) == pytest.approx(whole[0], rel=1e-12)
    assert evaluation.evaluate_lm(lm, stories=stories, nll=nll) == evaluation.evaluate_lm(lm, stories=stories)


def test_the_attribution_command_with_and_without_ray_and_its_mistakes(ckpt_root, tmp_path):
    pytest.importorskip("ray")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS[:4]), encoding="utf-8")
    cmd = [sys.executable, "-m", "viz_transformer", "attribution", "--checkpoint", str(ckpt_root / "tiny-zh-en"),
           "--corpus", str(corpus), "--max-steps", "2", "--quiet"]
    for out, extra in (("local.csv", []), ("ray.csv", ["--ray", "--workers", "2"])):
        r = subprocess.run(cmd + ["--out", str(tmp_path / out)] + extra, capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert "integrated_gradients" in r.stdout                    # the summary per method
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "ray.csv"), pd.read_csv(tmp_path / "local.csv"))
    want = corpus_taus(load_checkpoint(ckpt_root / "tiny-zh-en"), TEXTS[:4], max_steps=2, per_layer=True)
    np.testing.assert_allclose(pd.read_csv(tmp_path / "local.csv")["tau"].to_numpy(), want["tau"].to_numpy())
    bad_tsv = tmp_path / "bad.tsv"
    bad_tsv.write_text("我是一名工程师。\n", encoding="utf-8")
    base = [sys.executable, "-m", "viz_transformer"]
    for args, said in (
            (cmd[3:] + ["--out", str(tmp_path / "x.csv"), "--max-steps", "0"], "--max-steps must be 1 or more"),
            (["attribution", "--checkpoint", str(ROOT / "checkpoints" / "zh-en-bert"), "--out", str(tmp_path / "x.csv")],
             "writes no output"),
            (["attribution", "--checkpoint", str(ckpt_root / "tiny-zh-en"), "--corpus", str(tmp_path / "none.txt"),
              "--out", str(tmp_path / "x.csv")], "no such file"),
            (["evaluate", "--checkpoint", str(ROOT / "checkpoints" / "zh-en"), "--corpus", str(bad_tsv)],
             "expected at least two tab-separated columns"),
            (["evaluate", "--checkpoint", str(ROOT / "checkpoints" / "zh-en-bert"), "--ray"], "a masked LM is scored here"),
            (["evaluate", "--checkpoint", str(ROOT / "checkpoints" / "en-stories"), "--corpus", str(corpus)],
             "a language model is scored on blocks of")):
        r = subprocess.run(base + args, capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
