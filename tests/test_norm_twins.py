"""Pre-norm against its post-norm twin: two tiny encoder-decoders trained on the same data, split
and budget, one with the norm after the residual; Compare architectures' "norm" tab shows both runs' curves,
what they show in numbers, and the same head's attention at the same recorded step."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import viz_transformer.training.train as T
from app_util import array, by_key, figure, open_app, open_tab, texts
from viz_explorer.server import cached
from viz_transformer import load_checkpoint
from viz_transformer.training.snapshots import load_training_snapshots

from test_core_train import TINY, pairs_tsv  # noqa: F401  (the tiny corpus fixture)

PAGE = "viz_explorer/pages/experiment/compare_architectures.py"


@pytest.fixture(scope="module")
def twin_root(tmp_path_factory, pairs_tsv, ckpt_root):  # noqa: F811
    root = tmp_path_factory.mktemp("twins")
    for name, norm in (("tiny-pre", "pre"), ("a-tiny-post", "post")):      # the twin's name sorts first
        work = tmp_path_factory.mktemp(f"work-{norm}")
        assert T.main(["--task", "translation", "--data", str(pairs_tsv), "--out", str(root / name), "--work", str(work),
                       "--n-encoder-layers", "1", "--norm", norm, "--max-len", "64", "--epochs", "3", "--batch-size", "8",
                       "--n-test", "4", "--n-val", "4", "--eval-limit", "4", "--snapshot-bleu-n", "4", *TINY]) == 0
    shutil.copytree(ckpt_root / "tiny-zh-en-decoder", root / "tiny-zh-en-decoder")    # a second architecture
    return root


@pytest.mark.train
def test_norm_tab_shows_both_runs_and_the_same_head_at_the_same_step(twin_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(twin_root))
    pre, post = (load_checkpoint(twin_root / n) for n in ("tiny-pre", "a-tiny-post"))
    assert (pre.cfg.norm, post.cfg.norm) == ("pre", "post")
    # the comparison's encoder-decoder is the pre-norm model, and its twin is found beside it
    assert cached.comparison()["encoder_decoder"].name == "tiny-pre"
    assert [p.name for p in cached.norm_pair(twin_root / "tiny-pre")] == ["tiny-pre", "a-tiny-post"]
    assert [p.name for p in cached.norm_pair()] == ["tiny-pre", "a-tiny-post"]      # the post-norm model is no "pre"

    at = open_tab(open_app(PAGE, "tiny-pre"), "ar", "norm")
    body = texts(at)
    for meta in (pre.meta, post.meta):             # each run's best validation BLEU, read from its own curve
        assert len(meta["curve"]) == 3 and meta["plateau"]["to_step"] == meta["curve"][-1]["step"]
        assert f"{max(h['bleu'] for h in meta['curve']):.1f}" in body
    bleu = figure(at, "Validation BLEU after each epoch")
    assert [array(tr["y"]).tolist() for tr in bleu["data"]] == [[h["bleu"] for h in m["curve"]] for m in (pre.meta, post.meta)]

    snaps = [load_training_snapshots(twin_root / n) for n in ("tiny-pre", "a-tiny-post")]
    common = [s for s in snaps[0].steps if s in snaps[1].steps]
    assert common and snaps[0].steps == snaps[1].steps               # the same schedule: the same recorded steps
    name = "decoder.0.cross_attn.hook_pattern"
    for step in (common[-1], common[1]):
        if step != common[-1]:
            by_key(at.selectbox, "nt_step").set_value(step).run()
        for s, model in zip(snaps, ("pre-norm (tiny-pre)", "post-norm (a-tiny-post)")):
            heat = figure(at, f"{model}, step {step:,}")
            assert f"`{name}`, head 0, at the same training step ({step:,})" in texts(at)
            want = s.pattern(s.steps.index(step), 0, name)[0].numpy()
            assert np.allclose(array(heat["data"][0]["z"]), want, atol=1e-3)
    assert not np.allclose(snaps[0].pattern(-1, 0, name).numpy(), snaps[1].pattern(-1, 0, name).numpy(), atol=1e-3)
    assert "No post-norm translator" not in body


def test_without_a_twin_the_tab_says_so(ckpt_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    at = open_tab(open_app(PAGE, "tiny-zh-en"), "ar", "norm")
    assert "No post-norm translator" in texts(at)


def test_norm_twins_numbers_follow_their_definitions():
    from viz_transformer.analysis.architectures import norm_twins
    pre = {"curve": [{"bleu": b, "step": s} for b, s in ((5, 100), (18, 200), (24, 300), (25, 400))],
           "train_config": {"warmup": 150}}
    post = {"curve": [{"bleu": b, "step": s} for b, s in ((1, 100), (9, 200), (20, 300), (23, 400))]}
    pre_loss, post_loss = [(100, 6.0), (125, 5.5), (150, 5.0), (175, 4.8)], [(100, 7.0), (160, 6.1)]
    n = norm_twins(pre, post, pre_loss, post_loss)
    assert (n["pre_best"], n["post_best"], n["pre_best_step"], n["post_best_step"]) == (25, 23, 400, 400)
    assert n["level"] == pytest.approx(0.9 * 23) and (n["pre_to"], n["post_to"]) == (300, 400)   # 20.7: pre 24 at 300, post 23 at 400
    assert (n["pre_loss"], n["post_loss"], n["warmup"]) == (5.0, 6.1, 150)    # first point at or after update 150
    assert norm_twins({"curve": []}, post, pre_loss, post_loss) is None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_post_norm_model_without_a_twin_shows_its_sweep(monkeypatch, lang):
    """The shipped zh-en-postnorm has no pre-norm twin yet: the norm tab draws its learning-rate sweep from its
    meta.json (every run's curve) and states what it shows with the numbers schedule_sweep derives there."""
    from app_util import ROOT
    from viz_transformer.analysis.architectures import schedule_sweep
    monkeypatch.delenv("VIZ_CHECKPOINTS", raising=False)
    meta = load_checkpoint(ROOT / "checkpoints" / "zh-en-postnorm").meta
    sw = schedule_sweep(meta)
    at = open_tab(open_app(PAGE, "zh-en", text="我是一名工程师。", lang=lang, timeout=180), "ar", "norm")
    body = texts(at)
    assert "zh-en-postnorm" in body and "No post-norm translator" not in body
    for number in (f"{sw['test']:.1f}", f"{sw['val']:.1f}", f"{sw['old_test']:.1f}", f"{sw['lead_min']:+.1f}",
                   f"{sw['lead_max']:+.1f}"):
        assert number in body, number
    fig = figure(at, "over 6 epochs" if lang == "en" else "6 个轮次")
    drawn = sorted(np.round(array(tr["y"]).astype(float), 2).tolist() for tr in fig["data"])      # float32 on the wire
    assert drawn == sorted(r["curve"] for r in meta["schedule_sweep"]["runs"])
