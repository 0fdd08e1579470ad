"""Compacted runs (viz_transformer.run.derived_cache): every capture reads back bit for bit equal to the full
capture of HookedModel.run, for every architecture, with and without interventions; scores and
patterns are not stored where they recompute exactly, and stay stored where an intervention changed them."""
from __future__ import annotations

import pytest
import torch

from viz_transformer.run.derived_cache import DerivedCache, compact_run
from viz_transformer.run.interventions import head_ablation_hooks, positions_off_hooks
from viz_explorer.server.byte_lru import nbytes

TEXTS = {"tiny-zh-en": "我是一名工程师。", "tiny-lm": "Once upon a time there was a dog.",
         "tiny-prefix": "Once upon a time."}


def _same(full, small):
    assert list(small.cache) == list(full.cache) and len(small.cache) == len(full.cache)
    for name in full.cache:
        assert name in small.cache
        a, b = full.cache[name], small.cache[name]
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), name
    assert [n for n, _ in small.cache.items()] == list(full.cache)


@pytest.mark.parametrize("name", list(TEXTS))
def test_compact_run_reads_back_exactly(models, name):
    hm = models[name]
    full = hm.run(TEXTS[name])
    small = compact_run(full)
    _same(full, small)
    assert isinstance(small.cache, DerivedCache)
    derived = set(small.cache.derived)
    assert derived == {n for n in full.cache if n.endswith((".hook_scores", ".hook_pattern"))}
    assert nbytes(small) < nbytes(full)
    assert small.output == full.output and small.tgt_ids == full.tgt_ids and torch.equal(small.logits, full.logits)
    for part, n in full.cache.n_layers.items():
        if n:
            assert torch.equal(small.cache.stack("self_attn.hook_pattern", part), full.cache.stack("self_attn.hook_pattern", part))


def test_compact_shipped_translator_long_text(zh_en):
    full = zh_en.run("我是一名工程师。" * 30)
    small = compact_run(full)
    _same(full, small)
    dropped = sum(full.cache[n].nbytes for n in small.cache.derived)
    stored = list(small.cache._t.values())
    assert nbytes(stored) == sum(t.nbytes for _, t in full.cache.items()) - dropped
    assert nbytes(small.cache) < nbytes(full.cache)
    assert dropped > 0.3 * nbytes(full.cache)          # scores and patterns: a large part of a long text


def test_interventions_keep_what_cannot_be_recomputed(models):
    hm = models["tiny-zh-en"]
    text = TEXTS["tiny-zh-en"]
    uniform = head_ablation_hooks([("encoder.0.self_attn", 1)], "uniform", cfg=hm.cfg)   # rewrites hook_scores
    full = hm.run(text, fwd_hooks=uniform)
    small = compact_run(full)
    _same(full, small)
    assert "encoder.0.self_attn.hook_scores" not in small.cache.derived
    zero = hm.run(text, fwd_hooks=head_ablation_hooks([("decoder.0.cross_attn", 0)], "zero", cfg=hm.cfg))
    _same(zero, compact_run(zero))
    off = hm.run(text, fwd_hooks=positions_off_hooks(hm))
    _same(off, compact_run(off))


def test_filtered_capture_is_left_as_it_is(models):
    hm = models["tiny-zh-en"]
    run = hm.run(TEXTS["tiny-zh-en"], names_filter=lambda n: n.endswith(".hook_pattern"))
    small = compact_run(run)                  # no q, k, v, mask: nothing to recompute from
    assert not isinstance(small.cache, DerivedCache)
    _same(run, small)


@pytest.mark.parametrize("name", list(TEXTS))
def test_one_head_of_a_compact_run_is_the_captured_head(models, name):
    from viz_transformer.analysis.patterns import available_blocks, head_pattern, n_layers
    hm = models[name]
    full = hm.run(TEXTS[name])
    small = compact_run(full)
    for block in available_blocks(hm.cfg):
        for layer in range(n_layers(hm.cfg, block)):
            ref = full.cache[f"{block.split('.')[0]}.{layer}.{block.split('.')[1]}.hook_pattern"][0]
            for h in range(hm.cfg.n_heads):
                assert torch.allclose(head_pattern(small.cache, block, layer, h), ref[h], atol=1e-6), (block, layer, h)
                assert torch.equal(head_pattern(full.cache, block, layer, h), ref[h])


def test_one_head_of_an_intervened_pattern_is_the_stored_one(models):
    from viz_transformer.analysis.patterns import head_pattern
    hm = models["tiny-zh-en"]
    uniform = head_ablation_hooks([("encoder.0.self_attn", 1)], "uniform", cfg=hm.cfg)
    full = hm.run(TEXTS["tiny-zh-en"], fwd_hooks=uniform)
    small = compact_run(full)
    ref = full.cache["encoder.0.self_attn.hook_pattern"][0, 1]
    assert torch.equal(head_pattern(small.cache, "encoder.self_attn", 0, 1), ref)


@pytest.mark.parametrize("name", list(TEXTS))
def test_a_patterns_only_run_shows_what_the_full_intervened_run_shows(models, name):
    """The lean intervened runs the app keeps (the positions and knock-out pages): the same output, logits,
    predictions and every attention pattern as the full capture under the same hooks, with only q, k, v and
    mask stored (and a pattern an intervention changed)."""
    from viz_transformer.run.derived_cache import PATTERN_CAPTURES, patterns_only
    hm = models[name]
    block = "encoder.0.self_attn" if hm.cfg.is_encoder_decoder else "decoder.0.self_attn"
    for hooks in (positions_off_hooks(hm), head_ablation_hooks([(block, 1)], "zero", cfg=hm.cfg),
                  head_ablation_hooks([(block, 0)], "uniform", cfg=hm.cfg)):
        full = hm.run(TEXTS[name], fwd_hooks=hooks)
        lean = compact_run(hm.run(TEXTS[name], names_filter=patterns_only, fwd_hooks=hooks))
        assert lean.output == full.output and lean.tgt_ids == full.tgt_ids and lean.predicted == full.predicted
        assert torch.equal(lean.logits, full.logits)
        patterns = [n for n in full.cache if n.endswith(".hook_pattern")]
        assert patterns and all(torch.equal(lean.cache[n], full.cache[n]) for n in patterns)
        assert {n.rsplit(".", 1)[1] for n in lean.cache} <= set(PATTERN_CAPTURES)
        assert nbytes(lean.cache) < 0.5 * nbytes(compact_run(full).cache)
