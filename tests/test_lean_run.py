"""Lean runs (hm.run(text, lean=True), derived_cache.lean_forward): scores and patterns are checked as each
block passes and kept out of storage, so a long text never holds every block's [head, q, k] at once. What
they read back is what the full capture holds, bit for bit; and a shown pattern is the softmax of the stored
q, k and mask, against a softmax written here, torch's scaled_dot_product_attention, and transformers' own
output_attentions for an imported Hugging Face folder."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from viz_transformer.analysis.patterns import head_pattern
from viz_transformer.run.derived_cache import DerivedCache, compact_run, patterns_only
from viz_transformer.run.interventions import head_ablation_hooks, positions_off_hooks

TEXTS = {"tiny-zh-en": "我是一名工程师。", "tiny-lm": "Once upon a time there was a dog.",
         "tiny-prefix": "Once upon a time."}


def _same(full, lean):
    assert list(lean.cache) == list(full.cache)
    for name in full.cache:
        assert torch.equal(full.cache[name], lean.cache[name]), name
    assert torch.equal(full.logits, lean.logits) and full.output == lean.output


@pytest.mark.parametrize("name", list(TEXTS))
def test_lean_run_reads_back_the_full_capture(models, name):
    hm = models[name]
    full, lean = hm.run(TEXTS[name]), hm.run(TEXTS[name], lean=True)
    _same(full, lean)
    assert isinstance(lean.cache, DerivedCache)
    assert set(lean.cache.derived) == {n for n in full.cache if n.endswith((".hook_scores", ".hook_pattern"))}
    assert not any(n.endswith((".hook_scores", ".hook_pattern")) for n in lean.cache._t)


def test_lean_intervened_runs_keep_what_an_intervention_changed(models):
    hm = models["tiny-zh-en"]
    text = TEXTS["tiny-zh-en"]
    uniform = head_ablation_hooks([("encoder.0.self_attn", 1)], "uniform", cfg=hm.cfg)     # rewrites hook_scores
    full, lean = hm.run(text, fwd_hooks=uniform), hm.run(text, fwd_hooks=uniform, lean=True)
    _same(full, lean)
    assert "encoder.0.self_attn.hook_scores" in lean.cache._t
    off = positions_off_hooks(hm)
    _same(compact_run(hm.run(text, names_filter=patterns_only, fwd_hooks=off)),
          hm.run(text, names_filter=patterns_only, fwd_hooks=off, lean=True))


def _reference(q, k, v, mask):
    """A softmax written here and torch's SDPA output, from stored q [pos, head, d], k, v [pos, kv_head, d]
    and mask [q, k] (True: may attend)."""
    n_rep = q.shape[1] // k.shape[1]
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))                              # (nh, T, hs)
    k, v = k.repeat_interleave(n_rep, 0), v.repeat_interleave(n_rep, 0)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    pattern = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
    return pattern, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), v


@pytest.mark.parametrize("name", list(TEXTS))
def test_a_shown_pattern_is_the_softmax_of_the_stored_q_k_and_mask(models, name):
    hm = models[name]
    run = hm.run(TEXTS[name] * 3, lean=True)
    c = run.cache
    for prefix in sorted({p for p in c.derived.values()}):
        part, layer, block = prefix.split(".")
        rot = f"{prefix}.hook_rot_q" in c
        q, k = c[f"{prefix}.hook_rot_q" if rot else f"{prefix}.hook_q"][0], c[f"{prefix}.hook_rot_k" if rot else f"{prefix}.hook_k"][0]
        pattern, sdpa, v = _reference(q, k, c[f"{prefix}.hook_v"][0], c[f"{prefix}.hook_mask"][0, 0])
        for h in range(hm.cfg.n_heads):
            shown = head_pattern(c, f"{part}.{block}", int(layer), h)
            assert torch.allclose(shown, pattern[h], atol=1e-6), (prefix, h)
            assert torch.allclose(shown @ v[h], sdpa[h], atol=1e-5), (prefix, h)


def test_an_imported_folders_lean_patterns_are_transformers_own(tmp_path):
    pytest.importorskip("transformers")
    import hf_util as H
    from viz_transformer import load_checkpoint
    folder = H.build(H.SHAPE_BY_ID["qwen2-gqa2-tied-sharded"], tmp_path / "qwen2")
    hm = load_checkpoint(folder)
    run = hm.run(H.PROMPT * 4, lean=True)
    assert run.cache.derived
    _, theirs = H.hf_forward(H.load_hf(folder), run.tgt_ids)
    for layer, ref in enumerate(theirs):
        ours = run.cache[f"decoder.{layer}.self_attn.hook_pattern"][0]
        assert torch.allclose(ours, ref, atol=1e-5), layer
