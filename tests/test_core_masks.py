"""Masks from their definitions, and what the model does with them: no future leakage,
prefix-LM bidirectional inside the prefix only, padding never attended, rows that sum to 1."""
from __future__ import annotations

import pytest
import torch

from core_util import ARCHS, other_token, rand_ids, tiny_model
from viz_transformer.core.masks import causal_mask, combine, padding_mask, prefix_lm_mask, self_attention_mask

PAD = 0


def ref_mask(T, allowed) -> torch.Tensor:
    return torch.tensor([[allowed(i, j) for j in range(T)] for i in range(T)], dtype=torch.bool)


def test_causal_mask_is_lower_triangular():
    m = causal_mask(6)
    assert m.shape == (1, 1, 6, 6) and m.dtype == torch.bool
    assert torch.equal(m[0, 0], ref_mask(6, lambda i, j: j <= i))


def test_padding_mask_marks_real_keys():
    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 0, 6, 7, 8]])
    m = padding_mask(ids, PAD)
    assert m.shape == (2, 1, 1, 5)
    assert m[:, 0, 0].tolist() == [[True, True, True, False, False], [True, False, True, True, True]]


@pytest.mark.parametrize("P", [0, 1, 3, 6])
def test_prefix_lm_mask_definition(P):
    m = prefix_lm_mask(6, P)
    assert torch.equal(m[0, 0], ref_mask(6, lambda i, j: j <= i or (i < P and j < P)))


def test_prefix_lm_mask_one_prefix_per_row():
    m = prefix_lm_mask(5, torch.tensor([2, 4]))
    assert m.shape == (2, 1, 5, 5)
    for b, P in enumerate((2, 4)):
        assert torch.equal(m[b, 0], ref_mask(5, lambda i, j: j <= i or (i < P and j < P)))


def test_combine_is_logical_and():
    a = torch.tensor([[True, True], [False, True]])
    b = torch.tensor([True, False])
    assert combine(a, b).tolist() == [[True, False], [False, False]]
    assert torch.equal(combine(a), a)


def test_self_attention_mask_combines_padding_with_causal_or_prefix():
    ids = torch.tensor([[5, 6, 7, 8, 0], [5, 6, 0, 0, 0]])
    T = 5
    lens = [4, 2]
    causal = self_attention_mask(ids, PAD, "decoder_only", causal=True)
    prefix = self_attention_mask(ids, PAD, "prefix_lm", causal=True, prefix_len=3)
    full = self_attention_mask(ids, PAD, "encoder_decoder", causal=False)
    for b, n in enumerate(lens):
        assert torch.equal(causal[b, 0], ref_mask(T, lambda i, j: j <= i and j < n))
        assert torch.equal(prefix[b, 0], ref_mask(T, lambda i, j: (j <= i or (i < 3 and j < 3)) and j < n))
        assert torch.equal(full[b, 0], ref_mask(T, lambda i, j: j < n))


# -- the model ------------------------------------------------------------------------------------
def change(ids: torch.Tensor, pos: int) -> torch.Tensor:
    out = ids.clone()
    out[0, pos] = other_token(int(ids[0, pos]))
    return out


def close(a, b) -> bool:
    return torch.allclose(a, b, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_only_has_no_future_leakage(norm):
    model = tiny_model("decoder_only", norm=norm)
    ids = rand_ids(1, 10)
    with torch.no_grad():
        a, b = model(ids), model(change(ids, 6))
    assert close(a[:, :6], b[:, :6])            # positions before the change see nothing of it
    assert not close(a[:, 6:], b[:, 6:])        # ... and the change does matter where it may


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_encoder_decoder_decoder_has_no_future_leakage(norm):
    model = tiny_model("encoder_decoder", norm=norm)
    src, tgt = rand_ids(1, 7, seed=1), rand_ids(1, 9, seed=2)
    with torch.no_grad():
        a, b = model(src, tgt), model(src, change(tgt, 5))
        c = model(change(src, 6), tgt)
        mem_a, _ = model.encode(src)
        mem_c, _ = model.encode(change(src, 6))
    assert close(a[:, :5], b[:, :5])
    assert not close(a[:, 5:], b[:, 5:])
    # the encoder and the cross-attention see the whole source: a late source token changes early outputs
    assert not close(mem_a[:, :1], mem_c[:, :1])
    assert not close(a[:, :1], c[:, :1])


def test_prefix_lm_attends_both_ways_inside_the_prefix_only():
    model = tiny_model("prefix_lm", n_decoder_layers=2)
    T, P = 10, 5
    ids = rand_ids(1, T, seed=3)
    allowed = ref_mask(T, lambda i, j: j <= i or (i < P and j < P))
    with torch.no_grad():
        base, cache = model.run_with_cache(ids, prefix_len=P)
        late_prefix = model(change(ids, P - 1), prefix_len=P)
        after_prefix = model(change(ids, P + 1), prefix_len=P)
    for i in range(model.cfg.n_decoder_layers):
        pattern = cache[f"decoder.{i}.self_attn.hook_pattern"][0]            # (head, q, k)
        assert (pattern[:, ~allowed] == 0).all()
        assert (pattern[:, allowed] > 0).all()
        assert torch.equal(cache[f"decoder.{i}.self_attn.hook_mask"][0, 0], allowed)
    # position 0 sees position P-1 (both in the prefix) ...
    assert not close(base[:, :1], late_prefix[:, :1])
    # ... but nothing at or before the end of the prefix sees a token after it
    assert close(base[:, : P + 1], after_prefix[:, : P + 1])
    assert not close(base[:, P + 1:], after_prefix[:, P + 1:])


def test_source_padding_never_receives_weight():
    model = tiny_model("encoder_decoder")
    S, n_pad = 6, 3
    src, tgt = rand_ids(1, S, seed=4), rand_ids(2, 5, seed=5)
    longer = rand_ids(1, S + n_pad, seed=6)
    batch = torch.cat([torch.cat([src, torch.full((1, n_pad), PAD)], 1), longer])    # row 0 padded
    single, single_cache = model.run_with_cache(src, tgt[:1])
    padded, cache = model.run_with_cache(batch, tgt)
    torch.testing.assert_close(padded[0], single[0], atol=1e-5, rtol=1e-5)
    names = [f"encoder.{i}.self_attn.hook_pattern" for i in range(2)] + \
            [f"decoder.{i}.cross_attn.hook_pattern" for i in range(2)]
    for name in names:
        assert (cache[name][0, :, :, S:] == 0).all(), name
        assert (cache[name][1] > 0).all(), name        # the unpadded row attends everywhere
    for i in range(2):
        name = f"encoder.{i}.hook_resid_post"
        torch.testing.assert_close(cache[name][0, :S], single_cache[name][0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("architecture", ["decoder_only", "prefix_lm"])
def test_left_padding_never_receives_weight(architecture):
    model = tiny_model(architecture)
    ids = rand_ids(2, 8, seed=7)
    ids[0, :3] = PAD
    kw = {"prefix_len": 5} if architecture == "prefix_lm" else {}
    _, cache = model.run_with_cache(ids, **kw)
    for i in range(2):
        p = cache[f"decoder.{i}.self_attn.hook_pattern"]
        assert (p[0, :, :, :3] == 0).all()
        torch.testing.assert_close(p[0, :, 3:].sum(-1), torch.ones(2, 5))


@pytest.mark.parametrize("architecture", ARCHS)
def test_every_pattern_row_sums_to_one_and_masked_cells_are_zero(architecture):
    model = tiny_model(architecture, n_heads=4)
    ids = rand_ids(3, 9, seed=8)
    ids[1, 6:] = PAD                                     # padding in the decoder / LM input
    if architecture == "encoder_decoder":
        src = rand_ids(3, 7, seed=9)
        src[2, 4:] = PAD
        _, cache = model.run_with_cache(src, ids)
    else:
        _, cache = model.run_with_cache(ids, prefix_len=4 if architecture == "prefix_lm" else None)
    patterns = [n for n in cache if n.endswith("hook_pattern")]
    assert len(patterns) == (6 if architecture == "encoder_decoder" else 2)
    n_masked = 0
    for name in patterns:
        p, m = cache[name], cache[name.replace("hook_pattern", "hook_mask")].expand_as(cache[name])
        assert (p[~m] == 0).all(), name
        n_masked += int((~m).sum())
        any_allowed = m.any(-1)
        torch.testing.assert_close(p.sum(-1)[any_allowed], torch.ones(int(any_allowed.sum())), atol=1e-6, rtol=0)
        assert (p.sum(-1)[~any_allowed] == 0).all()
        assert (p >= 0).all()
    assert n_masked > 0
