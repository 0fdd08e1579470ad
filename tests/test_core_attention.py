"""Attention against PyTorch's own: F.scaled_dot_product_attention and nn.MultiheadAttention."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from viz_transformer.core.attention import MultiHeadAttention, attention, attention_weights
from viz_transformer.core.hooks import hooks_active, name_hook_points


def sdpa_weights(q, k, mask=None, scale=None):
    """Reference weights: SDPA with V = identity returns the attention matrix itself."""
    eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-2], k.shape[-2], k.shape[-2])
    return F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, scale=scale)


def random_mask(B, Tq, Tk, gen):
    m = torch.rand(B, 1, Tq, Tk, generator=gen) > 0.4
    m[..., 0] = True            # every query may attend somewhere (SDPA gives NaN otherwise)
    return m


@pytest.mark.parametrize("masked", ["none", "random", "causal"])
def test_attention_matches_sdpa(masked):
    g = torch.Generator().manual_seed(0)
    B, H, Tq, Tk, d = 2, 3, 5, 5 if masked == "causal" else 7, 8
    q, k, v = (torch.randn(B, H, T, d, generator=g) for T in (Tq, Tk, Tk))
    mask = None
    if masked == "random":
        mask = random_mask(B, Tq, Tk, g)
    elif masked == "causal":
        mask = torch.tril(torch.ones(Tq, Tk, dtype=torch.bool))
    st = attention(q, k, v, mask)
    out, w = st.z, st.weights
    torch.testing.assert_close(st.scaled, q @ k.transpose(-2, -1) / d ** 0.5, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, sdpa_weights(q, k, mask), atol=1e-6, rtol=1e-5)
    if mask is not None:
        assert (w.masked_select(~mask.expand_as(w)) == 0).all()


@pytest.mark.parametrize("case", ["plain", "mask", "broadcast mask", "bias", "divisor", "masked row", "causal",
                                  "causal rows", "all allowed", "key-broadcast mask"])
def test_weights_alone_are_attention_s_weights_bit_for_bit(case):
    """attention_weights (what a pattern read back from q and k uses) against attention().weights, and both
    against SDPA's where SDPA is defined."""
    g = torch.Generator().manual_seed(7)
    H, T, S, d = 3, 6, 9 if case != "causal" else 6, 8
    q, k, v = (torch.randn(H, n, d, generator=g) for n in (T, S, S))
    mask = bias = divisor = None
    if case in ("mask", "masked row"):
        mask = torch.rand(T, S, generator=g) > 0.5
        mask[:, 0] = case == "mask"
        mask[2] = mask[2] & (case == "mask")           # "masked row": row 2 sees nothing (all zeros, no NaN)
    elif case == "broadcast mask":
        mask = torch.rand(2, 1, T, S, generator=g) > 0.3        # more dimensions than q·kᵀ: [2, H, T, S]
        mask[..., 0] = True
    elif case == "bias":
        bias = torch.randn(1, H, T, S, generator=g)
    elif case == "divisor":
        divisor = 1.0
    elif case == "causal":
        mask = torch.ones(T, S, dtype=torch.bool).tril()
    elif case == "causal rows":                         # rows 3..8 of a causal 9 x 9 mask: keys 4..8 forbidden
        mask = torch.ones(S, S, dtype=torch.bool).tril()[3:3 + T]
    elif case == "all allowed":
        mask = torch.ones(T, S, dtype=torch.bool)
    elif case == "key-broadcast mask":                  # one flag a row, broadcast over the keys: row 1 sees nothing
        mask = torch.ones(T, 1, dtype=torch.bool)
        mask[1] = False
    steps = attention(q, k, v, mask, divisor, bias=bias)
    want = steps.weights
    got = attention_weights(q, k, mask, divisor, bias=bias)
    assert got.shape == want.shape and torch.equal(got, want), case
    again, scores = attention_weights(q, k, mask, divisor, bias=bias, with_scores=True)
    assert torch.equal(again, want) and torch.equal(scores, steps.masked.expand_as(scores)), case
    if case == "masked row":
        assert torch.equal(got[:, 2], torch.zeros(H, S))
    elif case == "key-broadcast mask":
        assert torch.equal(got[:, 1], torch.zeros(H, S))
        assert torch.allclose(got[:, 0], sdpa_weights(q, k)[:, 0], atol=1e-6)
    elif bias is None:
        ref = sdpa_weights(q.expand(*got.shape[:-2], T, d), k.expand(*got.shape[:-2], S, d), mask,
                           None if divisor is None else 1 / divisor)
        assert torch.allclose(got, ref, atol=1e-6)


def test_attention_custom_scale_and_fully_masked_row():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 4, 6, generator=g) for _ in range(3))
    st = attention(q, k, v, divisor=1 / 0.3)
    out, w = st.z, st.weights
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, sdpa_weights(q, k, scale=0.3), atol=1e-6, rtol=1e-5)
    mask = torch.ones(1, 1, 4, 4, dtype=torch.bool)
    mask[..., 2, :] = False                      # documented: a row with nothing to attend to is all zeros
    st = attention(q, k, v, mask)
    out, w = st.z, st.weights
    assert (w[..., 2, :] == 0).all() and (out[..., 2, :] == 0).all()
    assert not torch.isnan(out).any()


def make_pair(d=16, h=4, seed=0):
    """Our MultiHeadAttention and an nn.MultiheadAttention holding the same weights."""
    torch.manual_seed(seed)
    ours = MultiHeadAttention(d_model=d, n_heads=h, dropout=0.0).eval()
    for lin in (ours.W_Q, ours.W_K, ours.W_V, ours.W_O):
        nn.init.normal_(lin.bias, std=0.1)       # non-zero biases so a wrong bias would show
    ref = nn.MultiheadAttention(d, h, bias=True, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.W_Q.weight, ours.W_K.weight, ours.W_V.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.W_Q.bias, ours.W_K.bias, ours.W_V.bias]))
        ref.out_proj.weight.copy_(ours.W_O.weight)
        ref.out_proj.bias.copy_(ours.W_O.bias)
    name_hook_points(ours)
    return ours, ref


def run_ours(mha, x_q, x_kv, mask):
    got = {}
    with torch.no_grad(), hooks_active([("hook_pattern", lambda x, hook: got.setdefault("p", x.clone()))]):
        out, _ = mha(x_q, x_kv, mask)
    return out, got["p"]


@pytest.mark.parametrize("kind", ["self", "self_causal", "cross_padded"])
def test_multihead_matches_nn_multiheadattention(kind):
    d, h, B, Tq = 16, 4, 2, 5
    ours, ref = make_pair(d, h)
    g = torch.Generator().manual_seed(2)
    x_q = torch.randn(B, Tq, d, generator=g)
    if kind == "cross_padded":
        Tk = 7
        x_kv = torch.randn(B, Tk, d, generator=g)
        real = torch.ones(B, Tk, dtype=torch.bool)
        real[1, 4:] = False                                         # second sequence: 3 pad keys
        mask = real[:, None, None, :]                               # ours: True = may attend
        ref_kw = dict(key_padding_mask=~real)                       # nn.MHA: True = ignore
    else:
        Tk, x_kv = Tq, x_q
        mask = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
        ref_kw = {}
        if kind == "self_causal":
            allowed = torch.tril(torch.ones(Tq, Tk, dtype=torch.bool))
            mask = allowed.expand(B, 1, Tq, Tk)
            ref_kw = dict(attn_mask=~allowed)                       # nn.MHA: True = NOT allowed
    out, pattern = run_ours(ours, x_q, x_kv, mask)
    with torch.no_grad():
        ref_out, ref_w = ref(x_q, x_kv, x_kv, need_weights=True, average_attn_weights=False, **ref_kw)
        _, ref_avg = ref(x_q, x_kv, x_kv, need_weights=True, average_attn_weights=True, **ref_kw)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert pattern.shape == (B, h, Tq, Tk)
    torch.testing.assert_close(pattern, ref_w, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(pattern.mean(1), ref_avg, atol=1e-6, rtol=1e-5)
    if kind == "cross_padded":
        assert (pattern[1, :, :, 4:] == 0).all()


def test_multihead_hooks_and_returned_kv_follow_the_equations():
    """hook_scores = QKᵀ/√d_head per head; returned K, V are the projections split into heads."""
    d, h = 12, 3
    ours, _ = make_pair(d, h, seed=3)
    x = torch.randn(2, 4, d)
    got = {}
    names = ["hook_q", "hook_k", "hook_v", "hook_scores", "hook_z"]
    with torch.no_grad(), hooks_active([(n, lambda t, hook: got.__setitem__(hook.name, t.clone())) for n in names]):
        out, (K, V) = ours(x, x, torch.ones(1, 1, 4, 4, dtype=torch.bool))
        Q = ours.W_Q(x).view(2, 4, h, d // h)
        torch.testing.assert_close(got["hook_q"], Q)
        torch.testing.assert_close(K, ours.W_K(x).view(2, 4, h, d // h))
        torch.testing.assert_close(V, ours.W_V(x).view(2, 4, h, d // h))
        torch.testing.assert_close(got["hook_k"], K)
        scores = torch.einsum("bqhd,bkhd->bhqk", Q, K) / math.sqrt(d // h)
        torch.testing.assert_close(got["hook_scores"], scores, atol=1e-6, rtol=1e-5)
        z = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, -1), V)
        torch.testing.assert_close(got["hook_z"], z, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(out, ours.W_O(z.reshape(2, 4, d)), atol=1e-6, rtol=1e-5)


def test_past_kv_gives_the_last_rows_of_the_full_computation():
    d, h, T = 16, 4, 6
    ours, _ = make_pair(d, h, seed=4)
    x = torch.randn(1, T, d)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T)
    with torch.no_grad():
        full, _ = ours(x, x, causal)
        _, past = ours(x[:, :4], x[:, :4], causal[..., :4, :4])
        last, (K, V) = ours(x[:, 4:], x[:, 4:], causal[..., 4:, :], past=past)
    assert K.shape == (1, T, h, d // h)
    torch.testing.assert_close(last, full[:, 4:], atol=1e-6, rtol=1e-5)
