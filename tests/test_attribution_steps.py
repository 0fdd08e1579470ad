"""Attribution of every output step of a run at once (run/attribution.py: occlusion_steps, gradients_steps), as the
corpus pass makes it: each step's occlusion, grad × input and integrated gradients equal what the per-step functions
(Captum's Occlusion, InputXGradient, IntegratedGradients, each on the decoder cut after that step's row) give, to float
rounding; and the corpus pass's τ rows equal the per-step path's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from viz_transformer import load_checkpoint
from viz_transformer.analysis import attribution as AA
from viz_transformer.run import attribution as grads
from viz_transformer.training import corpora

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["tiny-zh-en", "tiny-lm", "tiny-prefix", "tiny-zh-en-decoder", "zh-en"]


def model(name, ckpt_root):
    return load_checkpoint((ROOT / "checkpoints" if name == "zh-en" else ckpt_root) / name)


def text_for(hm) -> str:
    return "我们明天在学校门口见面。" if hm.cfg.is_translator else "Once upon a time there was a little dog"


def close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-4) -> None:
    assert a.shape == b.shape
    assert float((a - b).abs().max()) <= rel * max(float(b.abs().max()), 1e-6), (a, b)


@pytest.mark.parametrize("name", MODELS)
def test_every_steps_occlusion_and_gradients_at_once_equal_each_step_alone(name, ckpt_root):
    hm = model(name, ckpt_root)
    run = hm.run(text_for(hm), max_new_tokens=6)
    steps = list(range(1, grads.n_steps(run) + 1))
    occluded, both = grads.occlusion_steps(hm, run, steps), grads.gradients_steps(hm, run, steps)
    assert sorted(occluded) == sorted(both) == steps
    for s in steps:
        tgt = grads.step_target(hm, run, s)
        close(occluded[s], grads.occlusion(hm, tgt))
        gx, ig = both[s]
        close(gx, grads.grad_x_input(hm, tgt))
        alone = grads.integrated_gradients(hm, tgt)
        close(ig.scores, alone.scores)
        close(ig.signed, alone.signed)
        assert ig.gap == pytest.approx(alone.gap, abs=1e-4) and ig.error == pytest.approx(alone.error, abs=1e-4)
        assert ig.error == pytest.approx(float(ig.signed.sum()) - ig.gap, abs=1e-4)       # completeness, as defined


def test_the_corpus_pass_gives_the_per_step_paths_rows(ckpt_root, monkeypatch):
    for hm, texts in ((model("tiny-zh-en", ckpt_root), corpora.load("zh")[:4]),
                      (model("zh-en", ckpt_root), corpora.load("zh")[4:7])):
        at_once = AA.corpus_taus(hm, texts, per_layer=True)
        with monkeypatch.context() as m:
            m.setattr(AA, "_every_step", lambda *args: {})             # each step's methods alone, as before
            each = AA.corpus_taus(hm, texts, per_layer=True)
        assert at_once[["sentence", "step", "method", "layer"]].equals(each[["sentence", "step", "method", "layer"]])
        np.testing.assert_allclose(at_once["tau"].to_numpy(), each["tau"].to_numpy(), atol=1e-12)


def test_fewer_points_than_the_floor_are_refused(ckpt_root):
    hm = model("tiny-zh-en", ckpt_root)
    run = hm.run(text_for(hm), max_new_tokens=2)
    with pytest.raises(ValueError, match="at least 32 steps"):
        grads.gradients_steps(hm, run, [1], ig_steps=8)


def test_sentences_on_threads_give_the_one_threads_rows_and_progress(ckpt_root):
    hm, texts = model("zh-en", ckpt_root), corpora.load("zh")[7:11]
    seen = []
    on_threads = AA.corpus_taus(hm, texts, lambda d, n: seen.append((d, n)), per_layer=True, workers=3)
    alone = AA.corpus_taus(hm, texts, per_layer=True)
    assert on_threads[["sentence", "step", "method", "layer"]].equals(alone[["sentence", "step", "method", "layer"]])
    np.testing.assert_allclose(on_threads["tau"].to_numpy(), alone["tau"].to_numpy(), atol=1e-12)
    assert seen == [(k, len(texts)) for k in range(1, len(texts) + 1)]
