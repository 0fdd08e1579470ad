"""Blocks and the whole model recomputed from their equations (F.layer_norm, SDPA), the KV cache
against a full recompute, and the configuration's checks."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from core_util import ARCHS, perturb, rand_ids, tiny_model
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import DecoderBlock, EncoderBlock

PAD = 0


# -- reference equations ----------------------------------------------------------------------
def ln(mod, x):
    return F.layer_norm(x, x.shape[-1:], mod.weight, mod.bias, mod.eps)


def mha(attn, x_q, x_kv, allowed):
    """Multi-head attention from the module's four projections and PyTorch's SDPA."""
    B, Tq, d = x_q.shape
    h = attn.n_heads

    def heads(t):
        return t.view(B, t.shape[1], h, d // h).transpose(1, 2)            # (B, h, T, dh)
    q = heads(F.linear(x_q, attn.W_Q.weight, attn.W_Q.bias))
    k = heads(F.linear(x_kv, attn.W_K.weight, attn.W_K.bias))
    v = heads(F.linear(x_kv, attn.W_V.weight, attn.W_V.bias))
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return F.linear(z.transpose(1, 2).reshape(B, Tq, d), attn.W_O.weight, attn.W_O.bias)


def ff(mod, x, activation):
    act = F.relu if activation == "relu" else F.gelu
    return F.linear(act(F.linear(x, mod.W_in.weight, mod.W_in.bias)), mod.W_out.weight, mod.W_out.bias)


def encoder_block(b, x, mask, norm, activation):
    if norm == "pre":                      # x + Attn(LN(x)), then + FF(LN(.))
        h = x + mha(b.self_attn, ln(b.ln1, x), ln(b.ln1, x), mask)
        return h + ff(b.ff, ln(b.ln2, h), activation)
    h = ln(b.ln1, x + mha(b.self_attn, x, x, mask))     # LN(x + Attn(x)), then LN(. + FF(.))
    return ln(b.ln2, h + ff(b.ff, h, activation))


def decoder_block(b, x, self_mask, memory, cross_mask, norm, activation):
    if norm == "pre":
        h = x + mha(b.self_attn, ln(b.ln1, x), ln(b.ln1, x), self_mask)
        if memory is not None:
            h = h + mha(b.cross_attn, ln(b.ln_cross, h), memory, cross_mask)
        return h + ff(b.ff, ln(b.ln2, h), activation)
    h = ln(b.ln1, x + mha(b.self_attn, x, x, self_mask))
    if memory is not None:
        h = ln(b.ln_cross, h + mha(b.cross_attn, h, memory, cross_mask))
    return ln(b.ln2, h + ff(b.ff, h, activation))


def reference_forward(model, ids, tgt=None, prefix_len=None):
    cfg = model.cfg
    d = cfg.d_model

    def embed(e, x):
        return e.W_E.weight[x] * math.sqrt(d) + e.pos.matrix()[: x.shape[1]]

    def causal(x, P=None):
        T = x.shape[1]
        i, j = torch.arange(T).view(T, 1), torch.arange(T).view(1, T)
        allowed = j <= i
        if P is not None:
            allowed = allowed | ((i < P) & (j < P))
        return allowed & (x != PAD)[:, None, None, :]

    memory = cross_mask = None
    if cfg.is_encoder_decoder:
        cross_mask = (ids != PAD)[:, None, None, :]
        x = embed(model.src_embed, ids)
        for b in model.encoder:
            x = encoder_block(b, x, cross_mask, cfg.norm, cfg.activation)
        memory = ln(model.encoder_norm, x) if cfg.norm == "pre" else x
        seq = tgt
    else:
        seq = ids
    x = embed(model.dec_embed, seq)
    for b in model.decoder:
        x = decoder_block(b, x, causal(seq, prefix_len), memory, cross_mask, cfg.norm, cfg.activation)
    if cfg.norm == "pre":
        x = ln(model.decoder_norm, x)
    W_U = model.dec_embed.W_E.weight if cfg.tie_embeddings else model.lm_head.weight
    return x @ W_U.T


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_computes_its_equations(norm, activation):
    model = tiny_model(norm=norm, activation=activation)
    block = perturb(EncoderBlock(model.cfg))
    x = torch.randn(2, 6, 16)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    with torch.no_grad():
        torch.testing.assert_close(block(x, mask), encoder_block(block, x, mask, norm, activation),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_decoder_block_computes_its_equations(norm):
    model = tiny_model(norm=norm)
    block = perturb(DecoderBlock(model.cfg), seed=1)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    self_mask = torch.tril(torch.ones(5, 5, dtype=torch.bool)).expand(2, 1, 5, 5)
    cross_mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    cross_mask[0, ..., 5:] = False
    with torch.no_grad():
        got = block(x, self_mask, memory, cross_mask)
        want = decoder_block(block, x, self_mask, memory, cross_mask, norm, "relu")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_pre_and_post_norm_differ():
    """The two placements give different functions of the same weights (so the tests above bite)."""
    pre, post = perturb(tiny_model(norm="pre")), tiny_model(norm="post")
    post.load_state_dict(pre.state_dict(), strict=False)      # post-norm has no final norms
    x = torch.randn(1, 4, 16)
    m = torch.ones(1, 1, 1, 4, dtype=torch.bool)
    with torch.no_grad():
        assert not torch.allclose(pre.encoder[0](x, m), post.encoder[0](x, m), atol=1e-3)


CASES = [
    dict(architecture="encoder_decoder"),
    dict(architecture="encoder_decoder", norm="post", activation="gelu", positional="learned", tie_embeddings=False),
    dict(architecture="decoder_only", norm="post", positional="learned"),
    dict(architecture="decoder_only", tie_embeddings=False, activation="gelu"),
    dict(architecture="prefix_lm"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_whole_model_equals_reference_forward(case):
    model = perturb(tiny_model(**case), seed=2)
    ids = rand_ids(2, 7, seed=1)
    ids[1, 5:] = PAD
    with torch.no_grad():
        if case["architecture"] == "encoder_decoder":
            tgt = rand_ids(2, 6, seed=3)
            got, want = model(ids, tgt), reference_forward(model, ids, tgt)
        else:
            P = 3 if case["architecture"] == "prefix_lm" else None
            got, want = model(ids, prefix_len=P), reference_forward(model, ids, prefix_len=P)
    real = (ids != PAD) if case["architecture"] != "encoder_decoder" else torch.ones(2, 6, dtype=torch.bool)
    torch.testing.assert_close(got[real], want[real], atol=1e-4, rtol=1e-4)


def test_tied_embeddings_share_one_matrix():
    tied, untied = tiny_model(), tiny_model(tie_embeddings=False)
    assert tied.lm_head.weight is tied.src_embed.W_E.weight is tied.tgt_embed.W_E.weight
    assert untied.lm_head.weight is not untied.tgt_embed.W_E.weight
    assert untied.src_embed.W_E.weight is not untied.tgt_embed.W_E.weight


# -- KV cache ---------------------------------------------------------------------------------
@pytest.mark.parametrize("architecture", ARCHS)
def test_kv_cache_equals_full_recompute(architecture):
    model = perturb(tiny_model(architecture), seed=3)
    ids = rand_ids(1, 9, seed=4)
    P = 4 if architecture == "prefix_lm" else None
    with torch.no_grad():
        if architecture == "encoder_decoder":
            src = rand_ids(1, 6, seed=5)
            full = model(src, ids)
            cache = model.new_cache(src)
        else:
            full = model(ids, prefix_len=P)
            cache = model.new_cache(prefix_len=P)
        chunks = [ids[:, :4]] + [ids[:, t: t + 1] for t in range(4, 9)]   # the prompt, then one at a time
        steps = torch.cat([model.decode(c, cache=cache) for c in chunks], dim=1)
    assert cache.length == 9
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_kv_cache_reorder_follows_the_chosen_rows():
    """Beam search keeps rows by parent: after reorder([1, 1]) both rows continue sequence 1."""
    model = perturb(tiny_model("encoder_decoder"), seed=4)
    src, tgt = rand_ids(2, 5, seed=6), rand_ids(2, 6, seed=7)
    with torch.no_grad():
        cache = model.new_cache(src)
        model.decode(tgt[:, :3], cache=cache)
        cache.reorder(torch.tensor([1, 1]))
        nxt = model.decode(tgt[1:, 3:].expand(2, 3), cache=cache)
        full = model(src[1:], tgt[1:])
    torch.testing.assert_close(nxt[0], full[0, 3:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(nxt[1], full[0, 3:], atol=1e-5, rtol=1e-5)


# -- configuration ----------------------------------------------------------------------------
def test_config_round_trip_and_checks():
    cfg = ModelConfig(vocab_size=100, d_model=32, n_heads=4, architecture="prefix_lm", n_encoder_layers=0)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.d_head == 8
    bad = [dict(d_model=30, n_heads=4), dict(architecture="rnn"), dict(norm="middle"), dict(positional="alibi"), dict(norm_type="batch"), dict(n_kv_heads=3),
           dict(activation="tanh"), dict(architecture="decoder_only", n_encoder_layers=2),
           dict(n_encoder_layers=0), dict(n_decoder_layers=0), dict(dropout=1.0), dict(vocab_size=3),
           dict(d_model=256.0), dict(max_len=64.5), dict(n_heads="8"), dict(dropout="0.1"), dict(vocab_size=None)]
    for kw in bad:
        with pytest.raises(ValueError):
            ModelConfig(**kw)
    with pytest.raises(ValueError, match="colour"):
        ModelConfig.from_dict({**cfg.to_dict(), "colour": "blue"})


def test_forward_argument_errors():
    with pytest.raises(ValueError):
        tiny_model("encoder_decoder")(rand_ids(1, 3))
    with pytest.raises(ValueError):
        tiny_model("decoder_only")(rand_ids(1, 3), rand_ids(1, 3))
    with pytest.raises(ValueError, match="max_len"):
        tiny_model("decoder_only")(rand_ids(1, 40))
    with pytest.raises(ValueError):
        tiny_model("encoder_decoder").new_cache()
