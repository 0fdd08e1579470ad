"""Interventions against independent references: the ablated head's hook_z by formula, upstream
tensors untouched, rank_heads against one teacher-forced forward per head and one full-recompute
greedy loop per head, positions off against a permutation, decode against a full recompute."""
from __future__ import annotations

import pytest
import torch

from conftest import ROOT
from viz_transformer import decode, DecodeSettings, load_checkpoint
from viz_transformer.core.hooks import hooks_active
from viz_transformer.run.interventions import (all_heads, head_ablation_hooks, head_means, positions_off_hooks,
                                           rank_heads)

TEXT = "我是一名工程师。"
N = 6                  # new tokens: random weights rarely say [end]
N_ZH = 16              # room for the shipped translator to say [end]
KO_ZH = ("今天天气很好。", "我们明天去北京。")       # where one head of zh-en changes the greedy output (one mode or another)
MODES = ("zero", "uniform", "mean")
PREFIXES = ("encoder.1.self_attn", "decoder.0.self_attn", "decoder.1.cross_attn")


@pytest.fixture(scope="module")
def prefix_lm(ckpt_root):
    return load_checkpoint(ckpt_root / "tiny-prefix")


def model_inputs(hm, text, out_ids):
    """Forward arguments for a teacher-forced pass on [begin] (+ the prompt) + out_ids, and the prompt length."""
    cfg, tok = hm.cfg, hm.tokenizer
    if cfg.is_encoder_decoder:
        return (torch.tensor([tok.encode(text) + [cfg.eos_id]]), torch.tensor([[cfg.bos_id] + out_ids])), {}, 1
    prompt = [cfg.bos_id] + tok.encode(text)
    kw = {"prefix_len": len(prompt)} if cfg.architecture == "prefix_lm" else {}
    return (torch.tensor([prompt + out_ids]),), kw, len(prompt)


@torch.no_grad()
def forced_logits(hm, text, out_ids, hooks=()):
    """[T, V] with [pad], [unk], [begin] at -inf; the prompt length."""
    args, kw, P = model_inputs(hm, text, out_ids)
    logits = hm.model.run_with_hooks(*args, fwd_hooks=list(hooks), **kw)[0].clone()
    tok = hm.tokenizer
    logits[:, [tok.pad_id, tok.unk_id, tok.bos_id]] = float("-inf")
    return logits, P


def greedy_full(hm, text, hooks=(), n=N):
    """Greedy by full recompute of the prefix at every step, [end] included when said."""
    out = []
    for _ in range(n):
        logits, _ = forced_logits(hm, text, out, hooks)
        out.append(int(logits[-1].argmax()))
        if out[-1] == hm.cfg.eos_id:
            break
    return out


def summed_logprob(hm, text, out_ids, labels, hooks=()):
    logits, P = forced_logits(hm, text, out_ids, hooks)
    logp = torch.log_softmax(logits, -1)
    return sum(float(logp[P - 1 + t, y]) for t, y in enumerate(labels))


def reference_hooks(prefix, h, mode, clean_z):
    """The ablation written out here, apart from the library: "uniform" replaces the pattern row
    using the mask of the same call; "mean" uses clean_z [q, head, d_head] of the unablated run."""
    def zero(z, hook):
        z = z.clone()
        z[:, :, h] = 0.0 if mode == "zero" else clean_z[:, h].mean(0)
        return z
    if mode != "uniform":
        return [(f"{prefix}.hook_z", zero)]
    seen = {}

    def keep(mask, hook):
        seen["mask"] = mask

    def uniform(p, hook):
        p, m = p.clone(), seen["mask"][:, 0].float()                      # (B, q, k)
        p[:, h] = m / m.sum(-1, keepdim=True).clamp(min=1)
        return p
    return [(f"{prefix}.hook_mask", keep), (f"{prefix}.hook_pattern", uniform)]


@pytest.fixture(scope="module")
def zh_en():
    """The shipped translator: its greedy output of TEXT ends with [end] ("I'm an engineer." [end])."""
    return load_checkpoint(ROOT / "checkpoints" / "zh-en")


# -- one head ablated: that head changes as the mode says, nothing upstream does --------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_ablating_a_head_changes_that_head_only(tiny_translator, prefix, mode):
    hm, h = tiny_translator, 2
    model = hm.model
    run = hm.run(TEXT, max_new_tokens=N)
    src, tgt = torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids])
    order = []
    with torch.no_grad(), hooks_active([(n, lambda x, hook: order.append(hook.name)) for n in model.hook_names]):
        model(src, tgt)
    means = head_means(hm, TEXT, max_new_tokens=N)
    clean_logits, clean = model.run_with_cache(src, tgt)
    with hooks_active(model.resolve_hooks(head_ablation_hooks([(prefix, h)], mode, means, cfg=hm.cfg))):
        logits, cache = model.run_with_cache(src, tgt)

    inside = [f"{prefix}.{p}" for p in ("hook_q", "hook_k", "hook_v", "hook_mask")]    # before the ablation point
    upstream = order[: order.index(f"{prefix}.hook_q")] + inside
    for name in upstream:
        assert torch.equal(cache[name], clean[name]), name
    z, z0 = cache[f"{prefix}.hook_z"][0], clean[f"{prefix}.hook_z"][0]              # (q, head, d_head)
    others = [i for i in range(hm.cfg.n_heads) if i != h]
    assert torch.equal(z[:, others], z0[:, others])
    if mode == "zero":
        assert (z[:, h] == 0).all()
    elif mode == "mean":
        mean = z0[:, h].sum(0) / z0.shape[0]                                         # over query positions
        torch.testing.assert_close(means[prefix][h], mean, atol=1e-6, rtol=1e-5)
        assert torch.equal(z[:, h], means[prefix][h].expand_as(z[:, h]))
    else:
        mask = clean[f"{prefix}.hook_mask"][0, 0].float()                           # (q, k)
        weights = mask / mask.sum(-1, keepdim=True)
        assert torch.equal(cache[f"{prefix}.hook_pattern"][0, h], weights)           # exactly 1/(allowed keys)
        v = clean[f"{prefix}.hook_v"][0, :, h]                                       # (k, d_head)
        torch.testing.assert_close(z[:, h], weights @ v, atol=1e-6, rtol=1e-5)
    assert (logits - clean_logits).abs().max() > 1e-4


@pytest.mark.parametrize("which", ["translator", "lm", "prefix"])
def test_uniform_rows_follow_the_mask_and_a_fully_masked_row_stays_zero(which, tiny_translator, tiny_lm, prefix_lm):
    hm = {"translator": tiny_translator, "lm": tiny_lm, "prefix": prefix_lm}[which]
    args, kw, _ = model_inputs(hm, TEXT, [5, 6, 7])
    prefix, h = "decoder.0.self_attn", 1

    def blank_first_row(mask, hook):
        mask = mask.clone()
        mask[:, :, 0] = False
        return mask
    hooks = [(f"{prefix}.hook_mask", blank_first_row)] + head_ablation_hooks([(prefix, h)], "uniform")
    with hooks_active(hm.model.resolve_hooks(hooks)):
        _, cache = hm.model.run_with_cache(*args, **kw)
    mask, pattern = cache[f"{prefix}.hook_mask"][0, 0], cache[f"{prefix}.hook_pattern"][0, h]
    assert (pattern[0] == 0).all()
    counts = mask[1:].sum(-1, keepdim=True)
    assert torch.equal(pattern[1:], torch.where(mask[1:], 1.0 / counts.float(), torch.zeros(())))
    assert len(set(counts.flatten().tolist())) > 1 or which == "translator"    # rows differ (causal)


def test_heads_and_modes_are_checked(tiny_translator, tiny_lm):
    cfg = tiny_translator.cfg
    with pytest.raises(ValueError, match="not an attention block prefix"):
        head_ablation_hooks([("encoder.0.attn", 0)])
    with pytest.raises(ValueError, match="layers are 0 … 1"):
        head_ablation_hooks([("encoder.2.self_attn", 0)], cfg=cfg)
    with pytest.raises(ValueError, match="heads are 0 … 3"):
        head_ablation_hooks([("decoder.0.cross_attn", 4)], cfg=cfg)
    with pytest.raises(ValueError, match="no decoder.cross_attn blocks"):
        head_ablation_hooks([("decoder.0.cross_attn", 0)], cfg=tiny_lm.cfg)
    with pytest.raises(ValueError, match="heads are 0 … 3"):                      # no cfg: when the hook runs
        tiny_translator.run(TEXT, max_new_tokens=2, fwd_hooks=head_ablation_hooks([("decoder.0.self_attn", 9)]))
    with pytest.raises(ValueError, match="pair"):
        head_ablation_hooks(["encoder.0.self_attn"])
    with pytest.raises(ValueError, match="unknown ablation mode"):
        head_ablation_hooks([("encoder.0.self_attn", 0)], mode="random")
    with pytest.raises(ValueError, match="head_means"):
        head_ablation_hooks([("encoder.0.self_attn", 0)], mode="mean")
    with pytest.raises(ValueError, match="unknown ablation mode"):
        rank_heads(tiny_translator, TEXT, mode="random", max_new_tokens=2)


# -- rank_heads against one teacher-forced forward and one greedy loop per head --------------------------------
def test_rank_heads_table_and_progress(tiny_translator, tiny_lm):
    calls = []
    df = rank_heads(tiny_translator, TEXT, progress=lambda i, n: calls.append((i, n)), max_new_tokens=N)
    assert list(df.columns) == ["block", "layer", "head", "delta_logprob", "output_changed"]
    assert len(df) == 2 * 4 + 2 * 2 * 4                                            # encoder, decoder self, cross
    assert list(df.iloc[5][["block", "layer", "head"]]) == ["encoder.1.self_attn", 1, 1]
    assert list(df.iloc[-1][["block", "layer", "head"]]) == ["decoder.1.cross_attn", 1, 3]
    assert [i for i, _ in calls] == sorted(i for i, _ in calls) and calls[-1][0] == calls[-1][1]
    assert len(rank_heads(tiny_lm, TEXT, max_new_tokens=N)) == 2 * 4


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("which", ["zh-en", "lm", "prefix"])
def test_rank_heads_delta_logprob_equals_a_forward_with_that_head_ablated(which, mode, zh_en, tiny_lm, prefix_lm):
    hm = {"zh-en": zh_en, "lm": tiny_lm, "prefix": prefix_lm}[which]
    n = N_ZH if which == "zh-en" else N
    df = rank_heads(hm, TEXT, mode, max_new_tokens=n)
    run = hm.run(TEXT, max_new_tokens=n)
    labels = run.trace.output_ids                       # the output and, for zh-en, its [end]
    assert (labels[-1] == hm.cfg.eos_id) == (which == "zh-en")
    clean = summed_logprob(hm, TEXT, run.output_ids, labels)
    heads = ([("encoder.0.self_attn", 1), ("decoder.1.self_attn", 2), ("decoder.0.cross_attn", 3)]
             if which == "zh-en" else [("decoder.0.self_attn", 1), ("decoder.1.self_attn", 3)])
    for prefix, h in heads:
        hooks = reference_hooks(prefix, h, mode, run.cache[f"{prefix}.hook_z"][0])
        want = summed_logprob(hm, TEXT, run.output_ids, labels, hooks) - clean
        row = df[(df["block"] == prefix) & (df["head"] == h)].iloc[0]
        assert row.delta_logprob == pytest.approx(want, abs=1e-4), (prefix, h)
        assert row.delta_logprob != 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("which", [pytest.param("zh-en", marks=pytest.mark.slow), "lm"])   # zh-en: a decode per head
def test_rank_heads_output_changed_equals_a_greedy_loop_per_head(which, mode, zh_en, tiny_lm):
    hm = {"zh-en": zh_en, "lm": tiny_lm}[which]
    n = N_ZH if which == "zh-en" else N
    for text in ([TEXT] if which == "lm" else [TEXT, *KO_ZH]):   # the shipped zh-en shrugs most single heads off:
        df = rank_heads(hm, text, mode, max_new_tokens=n)         # take a sentence where some head matters
        if df.output_changed.any():
            break
    means = head_means(hm, text, max_new_tokens=n)
    base = greedy_full(hm, text, n=n)
    rows = range(0, len(df), 5 if which == "zh-en" else 1)       # 15 of zh-en's 72 heads: a loop each is slow
    rows = sorted({*rows, *[i for i, c in enumerate(df.output_changed) if c][:2]})   # and the heads it says matter
    heads = [all_heads(hm.cfg)[i] for i in rows]
    want = [greedy_full(hm, text, head_ablation_hooks([head], mode, means), n) != base for head in heads]
    assert df.output_changed.iloc[list(rows)].tolist() == want
    assert any(want) and not all(want)


# -- positions off: the encoder sees a bag of pieces ---------------------------------------------------------
def test_positions_off_makes_the_encoder_permutation_equivariant(tiny_translator):
    hm = tiny_translator
    model, cfg = hm.model, hm.cfg
    ids = hm.tokenizer.encode("我们明天去北京。")                        # permute pieces, not characters
    assert len(set(ids)) >= 4
    perm = list(range(len(ids)))[::-1]
    src = torch.tensor([ids + [cfg.eos_id]])
    shuffled = torch.tensor([[ids[i] for i in perm] + [cfg.eos_id]])
    rows = perm + [len(ids)]                                                       # [end] stays last
    off = positions_off_hooks(hm)
    assert sorted(n for n, _ in off) == ["src_embed.hook_pos", "tgt_embed.hook_pos"]
    with torch.no_grad():
        with hooks_active(model.resolve_hooks(off)):
            a, b = model.encode(src)[0][0], model.encode(shuffled)[0][0]           # (S, d)
        torch.testing.assert_close(b, a[rows], atol=1e-5, rtol=0)
        a, b = model.encode(src)[0][0], model.encode(shuffled)[0][0]
    assert (b - a[rows]).abs().max() > 1e-2
    run = hm.run(TEXT, max_new_tokens=2, fwd_hooks=off)
    assert (run.cache["src_embed.hook_pos"] == 0).all() and (run.cache["tgt_embed.hook_pos"] == 0).all()


# -- decode with an ablation = a full recompute with it; run agrees ------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("which", ["translator", "lm", "prefix"])
def test_decode_with_an_ablation_equals_a_full_recompute(which, mode, tiny_translator, tiny_lm, prefix_lm):
    hm = {"translator": tiny_translator, "lm": tiny_lm, "prefix": prefix_lm}[which]
    heads = ([("encoder.0.self_attn", 0), ("decoder.0.self_attn", 1), ("decoder.1.cross_attn", 2)]
             if which == "translator" else [("decoder.0.self_attn", 0), ("decoder.1.self_attn", 3)])
    hooks = head_ablation_hooks(heads, mode, head_means(hm, TEXT, max_new_tokens=N), cfg=hm.cfg)
    trace = decode(hm, TEXT, DecodeSettings("greedy", max_new_tokens=N), hooks=hooks)
    want = greedy_full(hm, TEXT, hooks)
    assert trace.output_ids == want
    logits, _ = forced_logits(hm, TEXT, want[:-1], hooks)
    probs = torch.softmax(logits[-len(want):], -1)
    for t, step in enumerate(trace.steps):
        assert step.prob == pytest.approx(float(probs[t, step.token_id]), abs=1e-5)
    assert hm.run(TEXT, max_new_tokens=N, fwd_hooks=hooks).output_ids == trace.generated_ids
