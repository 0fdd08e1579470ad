"""RoPE against independent references: the rotation by its formula (each pair of dimensions (i, i + d/2) turned
by pos·θᵢ), norms kept, a KV-cache decode equal to the full forward, the score of rotated q and k depending only
on the offset (on the model's own captured q and k, equal to its captured hook_scores), and the positional page of
a RoPE model."""
from __future__ import annotations

import math

import pytest
import torch

from app_util import figures, open_app, page_file
from conftest import make_tiny_checkpoint
from viz_transformer import load_checkpoint
from viz_transformer.analysis.positions import rope_angles, rope_offset_scores
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.rope import cos_sin, inverse_frequencies, rotate

ROPE = dict(positional="rope", norm_type="rms", ffn="gated", activation="silu", n_heads=4, n_kv_heads=2,
            qkv_bias=False, out_bias=False, ffn_bias=False, scale_embeddings=False)


@pytest.fixture(scope="module")
def rope_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("rope")
    make_tiny_checkpoint(root / "tiny-rope", "decoder_only", **ROPE)
    return root


def test_rotation_by_its_formula():
    cfg = ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_encoder_layers=0, architecture="decoder_only",
                      positional="rope", rope_theta=100.0)
    x = torch.randn(1, 5, 2, 8)
    cos, sin = cos_sin(cfg, 3, 5)
    y = rotate(x, cos, sin)
    for p in range(5):
        for i in range(4):
            angle = (3 + p) * 100.0 ** (-2 * i / 8)
            a, b = x[0, p, :, i], x[0, p, :, i + 4]
            assert torch.allclose(y[0, p, :, i], a * math.cos(angle) - b * math.sin(angle), atol=1e-5)
            assert torch.allclose(y[0, p, :, i + 4], b * math.cos(angle) + a * math.sin(angle), atol=1e-5)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5)                  # a rotation keeps lengths
    assert torch.allclose(rope_angles(cfg, 5), cos_sin(cfg, 0, 5)[0][:, :4])


def test_scaling_types_change_the_frequencies_as_defined():
    base = dict(vocab_size=50, d_model=16, n_heads=2, n_encoder_layers=0, architecture="decoder_only",
                positional="rope", rope_original_max=32, max_len=64)
    plain, _ = inverse_frequencies(ModelConfig(**base))
    linear, _ = inverse_frequencies(ModelConfig(**base, rope_type="linear", rope_factor=4.0))
    assert torch.allclose(linear, plain / 4)
    dyn_short, _ = inverse_frequencies(ModelConfig(**base, rope_type="dynamic", rope_factor=2.0), seq_len=10)
    dyn_long, _ = inverse_frequencies(ModelConfig(**base, rope_type="dynamic", rope_factor=2.0), seq_len=64)
    assert torch.allclose(dyn_short, plain) and (dyn_long[1:] < plain[1:]).all()     # a larger base past the trained length
    _, scale = inverse_frequencies(ModelConfig(**base, rope_type="yarn", rope_factor=4.0))
    assert scale == pytest.approx(0.1 * math.log(4.0) + 1.0)


def test_kv_cache_decoding_equals_the_full_forward(rope_root):
    hm = load_checkpoint(rope_root / "tiny-rope")
    ids = torch.tensor([hm.tokenizer.encode("The cat sat on the mat and looked at the bird.")])
    with torch.no_grad():
        full = hm.model(ids)
        cache = hm.model.new_cache()
        parts = [hm.model.decode(ids[:, :4], cache=cache)] + [hm.model.decode(ids[:, t:t + 1], cache=cache)
                                                              for t in range(4, ids.shape[1])]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)


def test_the_score_depends_only_on_the_offset_on_the_models_own_q_and_k(rope_root):
    hm = load_checkpoint(rope_root / "tiny-rope")
    run = hm.run("The cat sat on the mat and looked at the bird.")
    for layer, head, i, j in ((0, 0, 6, 2), (1, 3, 5, 5), (1, 1, 8, 0)):
        q = run.cache[f"decoder.{layer}.self_attn.hook_q"][0, i, head]
        k = run.cache[f"decoder.{layer}.self_attn.hook_k"][0, j, head // 2]          # 2 query heads per KV head
        s = rope_offset_scores(hm.cfg, q, k, i, j, 12)
        own = run.cache[f"decoder.{layer}.self_attn.hook_scores"][0, head, i, j]
        assert torch.allclose(s["kept"], own.expand(13), atol=1e-4)                   # flat, and the model's own
        assert s["moved"][0] == pytest.approx(float(own), abs=1e-4)
        assert (s["moved"] - own).abs().max() > 1e-3                                  # moving only q changes it


def test_the_positional_page_of_a_rope_model(rope_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(rope_root))
    for lang in ("en", "zh"):
        at = open_app(page_file("positional"), "tiny-rope", "The cat sat on the mat.", lang=lang, timeout=120)
        assert not at.exception, [e.value for e in at.exception]
        figs = figures(at)
        assert len(figs) == 2, len(figs)
        flat = [tr for f in figs for tr in f["data"] if tr.get("type") == "scatter"]
        assert flat, "the offset curves"


def test_positions_off_takes_the_rotation_out(rope_root):
    from viz_transformer.run.interventions import positions_off_hooks
    hm = load_checkpoint(rope_root / "tiny-rope")
    text = "The cat sat on the mat."
    on, off = hm.run(text, target=" and"), hm.run(text, target=" and", fwd_hooks=positions_off_hooks(hm))
    for i in range(hm.cfg.n_decoder_layers):
        p = f"decoder.{i}.self_attn"
        assert torch.equal(off.cache[f"{p}.hook_rot_q"], off.cache[f"{p}.hook_q"])
        assert torch.equal(off.cache[f"{p}.hook_rot_k"], off.cache[f"{p}.hook_k"])
        assert not torch.allclose(on.cache[f"{p}.hook_rot_q"], on.cache[f"{p}.hook_q"])
    q, k = off.cache["decoder.0.self_attn.hook_q"][0, :, 0], off.cache["decoder.0.self_attn.hook_k"][0, :, 0]
    want = q @ k.T / math.sqrt(hm.cfg.d_head)                        # unrotated scores, head 0 (KV head 0)
    assert torch.allclose(off.cache["decoder.0.self_attn.hook_scores"][0, 0], want, atol=1e-5)
    assert (off.logits - on.logits).abs().max() > 1e-3
    run = hm.run(text, max_new_tokens=5, fwd_hooks=positions_off_hooks(hm))   # generated with the KV cache ...
    start = run.prompt_len - 1                                                   # ... and teacher-forced: they agree
    assert run.output_ids and run.predicted[start:start + len(run.output_ids)] == hm.tokenizer.pieces(run.output_ids)
