"""A lean run of a one-sequence model reads its prompt once (run/lean_once.py): the prompt's capture fills the
KV cache generation goes on from, and the output's positions are captured against it. Its run is the plain
lean run's (the prompt read twice, run/capture.py's other branch, taken here by switching the fast path off)
and the full capture's: the same names, shapes and dtypes, the same generated ids, trace and predictions, values
equal to float rounding; and the prompt's positions pass through the model once."""
from __future__ import annotations

import pytest
import torch

import viz_transformer.run.capture as capture
from viz_transformer.core.hooks import hooks_active
from viz_transformer.run.derived_cache import DerivedCache, shown_captures

TEXT = "Once upon a time there was a dog. It ran to the park and"


@pytest.fixture(scope="module")
def lms(ckpt_root):
    from viz_transformer import load_checkpoint
    return {n: load_checkpoint(ckpt_root / n) for n in ("tiny-lm", "tiny-prefix", "tiny-zh-en-prefix")}


@pytest.fixture(scope="module")
def hf_lms(tmp_path_factory):
    """Imported folders: RoPE with grouped-query attention (Qwen2), q/k norms (Qwen3), a sliding window shorter
    than the text (Mistral)."""
    pytest.importorskip("transformers")
    import hf_util as H
    from viz_transformer import load_checkpoint
    root = tmp_path_factory.mktemp("hf_lean_fast")
    with pytest.MonkeyPatch.context() as mp:    # [end] not made reachable: the tests need an output to read after the
        mp.setenv("NOEOS", "1")                 # prompt (a made-reachable [end] came first in one test order in CI)
        return {i: load_checkpoint(H.build(H.SHAPE_BY_ID[i], root / i))
                for i in ("qwen2-gqa2-tied-sharded", "qwen3-headdim24-gqa2-tied", "mistral-window6-gqa1")}


def _twice(hm, text, monkeypatch, **kw):
    """The plain lean run: the prompt read by generation and again by the capture."""
    with monkeypatch.context() as m:
        m.setattr(capture, "reads_prompt_once", lambda *a: False)
        return hm.run(text, lean=True, **kw)


def _same(ref, run, exact_derived: bool = True):
    assert run.tgt_ids == ref.tgt_ids and run.output_ids == ref.output_ids and run.output == ref.output
    assert run.predicted == ref.predicted and run.prompt_len == ref.prompt_len
    assert list(run.cache) == list(ref.cache)
    for name in ref.cache:
        a, b = ref.cache[name], run.cache[name]
        assert a.shape == b.shape and a.dtype == b.dtype, name
        if a.dtype == torch.bool:
            assert torch.equal(a, b), name
        else:
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), name
    if exact_derived:
        assert run.cache.derived == ref.cache.derived and run.cache._t.keys() == ref.cache._t.keys()
    assert ref.logits.shape == run.logits.shape and torch.allclose(ref.logits, run.logits, atol=1e-5, rtol=1e-5)
    assert [s.token_id for s in run.trace.steps] == [s.token_id for s in ref.trace.steps]
    for s, r in zip(run.trace.steps, ref.trace.steps):
        assert s.prob == r.prob and s.candidates == r.candidates
        assert s.attention.keys() == r.attention.keys()
        assert all(torch.equal(s.attention[k], r.attention[k]) for k in s.attention)


def _cases(lms, hf_lms):
    return [(n, hm) for n, hm in {**lms, **hf_lms}.items()]


@pytest.mark.parametrize("filt", [None, shown_captures])
def test_reading_the_prompt_once_gives_the_plain_lean_run(lms, hf_lms, monkeypatch, filt):
    for name, hm in _cases(lms, hf_lms):
        text = TEXT if hm.cfg.max_len > 64 else TEXT[:40]
        fast = hm.run(text, names_filter=filt, lean=True, max_new_tokens=12)
        assert isinstance(fast.cache, DerivedCache) and fast.cache.derived, name
        assert fast.output_ids, name                     # there is an output to capture against the prompt's cache
        _same(_twice(hm, text, monkeypatch, names_filter=filt, max_new_tokens=12), fast)
        _same(hm.run(text, names_filter=filt, max_new_tokens=12), fast, exact_derived=False)   # the full capture


def test_the_joined_mask_is_the_models_own_on_the_whole_sequence(lms, hf_lms):
    from viz_transformer.core.masks import self_attention_mask
    for name, hm in _cases(lms, hf_lms):
        cfg = hm.cfg
        run = hm.run(TEXT[:40], lean=True, max_new_tokens=8)
        ids = torch.tensor([run.tgt_ids])
        want = self_attention_mask(ids, cfg.pad_id if cfg.bos_id != cfg.pad_id else -1, cfg.architecture,
                                   causal=True, prefix_len=run.prefix_len, window=cfg.sliding_window)
        for i in range(cfg.n_decoder_layers):
            got = run.cache[f"decoder.{i}.self_attn.hook_mask"]
            assert got.shape == (1, 1, len(run.tgt_ids), len(run.tgt_ids)), name
            assert torch.equal(got, want.expand_as(got)), (name, i)


def _prompt_reads(hm, text, monkeypatch=None):
    """How many forwards over the whole prompt (or more) one lean run makes."""
    n_prompt = len(capture.encode_input(hm.tokenizer, hm.cfg, text, reserve=12).prompt)
    seen = []

    def count(x, hook):
        seen.append(x.shape[1])
    with hooks_active([("decoder.0.hook_resid_pre", count)]):
        run = _twice(hm, text, monkeypatch, max_new_tokens=12) if monkeypatch else hm.run(text, lean=True,
                                                                                          max_new_tokens=12)
    return sum(n >= n_prompt for n in seen), len(run.output_ids)


def test_the_prompt_passes_through_the_model_once(lms, monkeypatch):
    for name, hm in lms.items():
        reads, n_out = _prompt_reads(hm, TEXT[:40])
        assert n_out > 1 and reads == 1, name
        assert _prompt_reads(hm, TEXT[:40], monkeypatch)[0] == 2, name      # the plain lean run: twice


def test_interventions_targets_and_t5_keep_the_plain_path(lms, tiny_translator):
    from viz_transformer.run.lean_once import reads_prompt_once
    hm = lms["tiny-lm"]
    assert reads_prompt_once(hm.model, None, [])
    assert not reads_prompt_once(hm.model, [5, 6], [])
    assert not reads_prompt_once(hm.model, None, [("decoder.0.hook_resid_pre", lambda x, h: None)])
    assert not reads_prompt_once(tiny_translator.model, None, [])
