"""load_checkpoint(path, dtype, device): float32 by default, bfloat16 to halve the weights' memory, on
a GPU when there is one. Whatever the weights, logits and captured tensors reach analysis as float32 on the CPU.

bfloat16 keeps 8 significant bits: each weight and each intermediate result is rounded with a relative error of
at most u = 2^-8 ≈ 0.4%. Over the few roundings a value meets in this 2-layer model the errors add up to a few u,
so the logits may move by a few percent of their size and no more: we allow 5% of the largest logit (≈ 13 u),
and require some change (bfloat16 really ran)."""
from __future__ import annotations

import pytest
import torch

from viz_transformer import decode, DecodeSettings, load_checkpoint
from viz_transformer.run.capture import pick_device, weight_bytes

TEXT = "我是一名工程师。"
U = 2.0 ** -8                       # bfloat16's unit roundoff


@pytest.fixture(scope="module")
def folder(ckpt_root):
    return ckpt_root / "tiny-zh-en"


@pytest.fixture(scope="module")
def pair(folder):
    return load_checkpoint(folder), load_checkpoint(folder, dtype="bfloat16")


def test_float32_is_the_default_and_auto_is_the_cpu_here(pair):
    f32, bf16 = pair
    assert torch.cuda.is_available() or pick_device("auto") == "cpu"
    assert {p.dtype for p in f32.model.parameters()} == {torch.float32}
    assert {p.dtype for p in bf16.model.parameters()} == {torch.bfloat16}
    assert f32.model.device.type == pick_device("auto")


def test_bfloat16_halves_the_weights(pair):
    f32, bf16 = pair
    n = sum(t.numel() for t in {id(t): t for t in [*f32.model.parameters(), *f32.model.buffers()]}.values())
    assert weight_bytes(f32.model) == 4 * n                  # counted independently: numbers × 4 bytes
    assert weight_bytes(bf16.model) == 2 * n
    assert bf16.model.lm_head.weight is bf16.model.dec_embed.W_E.weight or not bf16.cfg.tie_embeddings


def test_bfloat16_logits_are_close_to_float32(pair):
    f32, bf16 = pair
    target = f32.run(TEXT).output
    a, b = f32.run(TEXT, target=target), bf16.run(TEXT, target=target)     # both teacher-forced on one target
    assert b.logits.dtype == torch.float32 and b.logits.device.type == "cpu"
    diff = (a.logits - b.logits).abs().max()
    assert 0 < diff <= 0.05 * a.logits.abs().max(), (float(diff), float(a.logits.abs().max()))
    for name in ("decoder.0.self_attn.hook_pattern", "encoder.0.self_attn.hook_pattern"):
        assert b.cache[name].dtype == torch.float32 and b.cache[name].device.type == "cpu"
        assert (a.cache[name] - b.cache[name]).abs().max() <= 20 * U          # weights in [0, 1]


def test_bfloat16_decodes(pair):
    _, bf16 = pair
    for strategy in ("greedy", "beam"):
        tr = decode(bf16, TEXT, DecodeSettings(strategy, max_new_tokens=6))
        assert tr.steps and all(0 <= s.prob <= 1 for s in tr.steps)


def test_bad_settings_are_refused(folder):
    with pytest.raises(ValueError, match="dtype"):
        load_checkpoint(folder, dtype="int8")
    with pytest.raises(ValueError, match="device"):
        load_checkpoint(folder, device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU"):
            load_checkpoint(folder, device="cuda")


def test_the_app_reads_its_settings_from_the_environment(monkeypatch):
    from viz_explorer.server.cached import weight_settings
    monkeypatch.delenv("VIZ_DTYPE", raising=False)
    monkeypatch.delenv("VIZ_DEVICE", raising=False)
    assert weight_settings() == ("float32", "auto")
    monkeypatch.setenv("VIZ_DTYPE", "BFloat16")
    monkeypatch.setenv("VIZ_DEVICE", "cpu")
    assert weight_settings() == ("bfloat16", "cpu")
    monkeypatch.setenv("VIZ_DTYPE", "int4")                       # unknown: the default, the app still starts
    monkeypatch.setenv("VIZ_DEVICE", "cuda" if not torch.cuda.is_available() else "tpu")
    assert weight_settings() == ("float32", "auto")
