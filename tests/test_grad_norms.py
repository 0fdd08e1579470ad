"""Gradient norms at initialisation (training/grad_norms.py) against a hand-made backward pass, and the
Compare architectures page's pre/post-norm tab against the numbers it reads."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
import torch.nn.functional as F

from app_util import array, figures, open_app, open_tab, texts
from viz_transformer import load_checkpoint
from viz_transformer.analysis import architectures as A
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import Transformer
from viz_transformer.training import grad_norms as G
from viz_explorer.kit.strings import EN

PAIRS = [("我是学生。", "I am a student."), ("我爱你。", "I love you."), ("他是我的朋友。", "He is my friend."),
         ("今天天气很好。", "The weather is nice today.")]


def _by_hand(cfg: ModelConfig, tok, norm: str, seed: int) -> list[float]:
    """The same measurement written out: one model, a padded batch, the label-smoothed loss over the
    target tokens, torch.autograd.grad per layer."""
    torch.manual_seed(seed)
    model = Transformer(ModelConfig(**{**cfg.to_dict(), "norm": norm, "dropout": 0.0}))
    src = [tok.encode(s) + [tok.eos_id] for s, _ in PAIRS]
    tgt = [[tok.bos_id] + tok.encode(t) + [tok.eos_id] for _, t in PAIRS]
    pad = lambda rows: torch.tensor([r + [tok.pad_id] * (max(map(len, rows)) - len(r)) for r in rows])  # noqa: E731
    s, tg = pad(src), pad(tgt)
    logits = model(s, tg[:, :-1])
    y = tg[:, 1:]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=tok.pad_id,
                           label_smoothing=0.1)
    out = []
    for name in G.layer_names(cfg):
        params = [p for n, p in model.named_parameters() if n.startswith(name + ".")]
        grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        out.append(float(torch.cat([g.reshape(-1) for g in grads if g is not None]).norm()))
    return out


def test_init_gradient_norms_equal_a_hand_made_backward_pass(tiny_translator):
    cfg, tok = tiny_translator.cfg, tiny_translator.tokenizer
    before = torch.get_rng_state()
    got = G.init_gradient_norms(cfg, tok, PAIRS, seeds=(3, 4))
    assert torch.equal(torch.get_rng_state(), before)          # a training run's random state is untouched
    assert got["layers"] == [f"encoder.{i}" for i in range(cfg.n_encoder_layers)] + \
        [f"decoder.{i}" for i in range(cfg.n_decoder_layers)]
    for norm in ("pre", "post"):
        want = [(a + b) / 2 for a, b in zip(_by_hand(cfg, tok, norm, 3), _by_hand(cfg, tok, norm, 4))]
        assert got[norm] == pytest.approx(want, rel=1e-4), norm
    assert got["pre"] != pytest.approx(got["post"], rel=1e-3)      # the placement matters


def test_gradient_growth_is_the_ratios_of_the_measured_norms():
    g = {"layers": ["encoder.0", "decoder.1"], "pre": [2.0, 1.0], "post": [1.5, 6.0]}
    r = A.gradient_growth(g)
    assert (r["pre_growth"], r["post_growth"], r["at_output"], r["at_input"]) == (0.5, 4.0, 6.0, 0.75)
    assert (r["first"], r["last"]) == ("encoder.0", "decoder.1")


@pytest.mark.slow
def test_norm_tab_draws_the_measurement_stored_in_meta(ckpt_root, tmp_path, monkeypatch):
    root = tmp_path / "ck"
    for name in ("tiny-zh-en", "tiny-zh-en-decoder"):
        shutil.copytree(ckpt_root / name, root / name)
    hm = load_checkpoint(root / "tiny-zh-en")
    grads = G.init_gradient_norms(hm.cfg, hm.tokenizer, PAIRS, seeds=(0,))
    meta = json.loads((root / "tiny-zh-en" / "meta.json").read_text(encoding="utf-8"))
    (root / "tiny-zh-en" / "meta.json").write_text(json.dumps({**meta, G.KEY: grads}), encoding="utf-8")
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(root))
    at = open_app("viz_explorer/pages/experiment/compare_architectures.py", "tiny-zh-en")
    open_tab(at, "ar", "norm")
    assert not at.exception
    fig = next(f for f in figures(at) if "Gradient norm" in f["layout"]["title"]["text"])
    lines = {d["name"]: list(array(d["y"])) for d in fig["data"]}
    assert lines[EN["ar.norm_pre"]] == pytest.approx(grads["pre"])
    assert lines[EN["ar.norm_post"]] == pytest.approx(grads["post"])
    r = A.gradient_growth(grads)
    assert f"×{r['post_growth']:.2f}" in texts(at) and f"{r['at_output']:.2f}×" in texts(at)
