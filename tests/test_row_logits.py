"""A lean LM run keeps its logits as rows projected when read (run/row_logits.py) and holds a capture two names
share once (derived_cache.lean_capture). Checked against a full capture of the same text (hm.run without lean:
its logits a [pos, vocab] tensor, every capture its own copy) and against the model's own projection of the
kept residual; the confidence line, the logit lens's final tokens and the run's predictions are unchanged."""
from __future__ import annotations

import pytest
import torch

import viz_transformer.run.row_logits as row_logits
from viz_transformer.analysis import confidence
from viz_transformer.run import forced, interventions, lenses
from viz_transformer.run.derived_cache import shown_captures
from viz_transformer.run.row_logits import RowLogits
from viz_explorer.server.byte_lru import nbytes

TEXT = "Once upon a time there was a dog. It ran to the park and"
STEP = 8        # rows per block here, so a short text has several blocks and rows both kept and projected later


@pytest.fixture(scope="module")
def models(ckpt_root, tmp_path_factory):
    """Ours (learned positions, post-norm) and an imported Qwen2 folder (RoPE, grouped-query attention, tied)."""
    from viz_transformer import load_checkpoint
    out = {"tiny-lm": load_checkpoint(ckpt_root / "tiny-lm")}
    if pytest.importorskip("transformers"):
        import hf_util as H
        root = tmp_path_factory.mktemp("row_logits")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NOEOS", "1")                 # an output to read after the prompt
            out["qwen2"] = load_checkpoint(H.build(H.SHAPE_BY_ID["qwen2-gqa2-tied-sharded"], root / "q"))
    return out


def _runs(hm, monkeypatch, **kw):
    """(the lean run, with STEP rows a block; the full capture of the same text)."""
    text = TEXT if hm.cfg.max_len > 64 else TEXT[:40]
    with monkeypatch.context() as m:
        m.setattr(row_logits, "ROWS", STEP)
        lean = hm.run(text, names_filter=shown_captures, lean=True, max_new_tokens=12, **kw)
    return lean, hm.run(text, names_filter=shown_captures, max_new_tokens=12, **kw)


@pytest.mark.parametrize("name", ["tiny-lm", "qwen2"])
def test_rows_are_the_full_captures_logits(models, monkeypatch, name):
    hm = models[name]
    lean, full = _runs(hm, monkeypatch)
    L, ref = lean.logits, full.logits
    assert isinstance(L, RowLogits) and isinstance(ref, torch.Tensor)
    T = len(lean.tgt_ids)
    assert T > 3 * STEP and L.kept_from == lean.prompt_len - 1 and lean.output_ids, name
    assert L.shape == ref.shape and len(L) == T and L.dtype == ref.dtype
    assert torch.allclose(L.full(), ref, atol=1e-5, rtol=1e-5)             # lean_once: to float rounding
    assert torch.allclose(L, ref, atol=1e-5, rtol=1e-5)                    # a torch function sees the whole tensor
    whole = L.full()
    for idx in (0, 5, -1, T - 2, torch.tensor(3), slice(2, 19), slice(None, None, 5), [1, 17, 2, T - 1],
                torch.tensor([4, 0, 9]), torch.arange(T) % 3 == 0, (7, 11), (slice(3, 12), 5),
                (torch.tensor([2, 30]),)):
        assert torch.equal(L[idx], whole[idx]), idx                       # every way a page indexes rows
    with pytest.raises(IndexError, match="out of range"):
        L[T]


@pytest.mark.parametrize("name", ["tiny-lm", "qwen2"])
def test_a_row_read_later_is_the_models_projection_of_the_kept_residual(models, monkeypatch, name):
    hm = models[name]
    lean, _ = _runs(hm, monkeypatch)
    L = lean.logits
    last = lean.cache[f"decoder.{hm.cfg.n_decoder_layers - 1}.hook_resid_post"][0]
    assert torch.equal(L.resid, last)                                    # the last block's output, as captured
    for b in range(0, len(L), STEP):
        block = hm.model.unembed(last[b:b + STEP])                       # the model's own final norm and head
        assert torch.equal(L[b:b + STEP], block), b                      # bit for bit, kept rows too
    assert L.kept.shape[0] == len(L) - L.kept_from                       # only the output's rows are held


@pytest.mark.parametrize("name", ["tiny-lm", "qwen2"])
def test_what_the_pages_read_is_unchanged(models, monkeypatch, name):
    hm = models[name]
    lean, full = _runs(hm, monkeypatch)
    assert lean.predicted_ids == full.predicted_ids and lean.predicted == full.predicted
    assert len(lean.predicted_ids) == len(lean.tgt_ids)
    ids = lean.tgt_ids[1:]
    assert torch.allclose(lean.logits.next_logprobs, confidence.picked_logprobs(full.logits[:len(ids)], ids),
                          atol=1e-5)
    assert confidence.prompt_perplexity(lean) == pytest.approx(confidence.prompt_perplexity(full), rel=1e-5)
    assert torch.allclose(confidence.token_logprobs(lean, hm.cfg), confidence.token_logprobs(full, hm.cfg), atol=1e-5)
    a, b = 3, 9
    view, ref = lenses.lens_view(hm, lean, window=(a, b)), lenses.lens_view(hm, full, window=(a, b))
    assert view.final_ids == ref.final_ids and view.final_pieces == ref.final_pieces
    assert torch.allclose(view.final_prob[:, a:b], ref.final_prob[:, a:b], atol=1e-5)


def test_the_run_holds_rows_not_the_tensor(models, monkeypatch):
    hm = models["qwen2"]
    lean, full = _runs(hm, monkeypatch)
    calls = []
    real = lean.logits._unembed
    lean.logits._unembed = lambda x: calls.append(len(x)) or real(x)
    L = lean.logits
    assert nbytes(L) == L.kept.nbytes + L.resid.untyped_storage().nbytes() + L.next_logprobs.nbytes
    assert L.kept.nbytes < full.logits.nbytes / 2                         # the output's rows, not every row
    assert not hasattr(lean.logits, "memory_usage") and not calls       # a probe of the memo's accounting projects
    lean.logits[lean.prompt_len:]                                        # nothing; the kept rows neither
    assert not calls
    lean.logits[1]
    assert calls == [STEP]                                               # one block for one earlier row


def test_captures_two_names_share_are_held_once(models, monkeypatch):
    hm = models["qwen2"]
    lean, full = _runs(hm, monkeypatch)
    t = lean.cache._t
    for i in range(1, hm.cfg.n_decoder_layers):
        assert t[f"decoder.{i}.hook_resid_pre"] is t[f"decoder.{i - 1}.hook_resid_post"]
        assert t[f"decoder.{i}.self_attn.hook_mask"] is t["decoder.0.self_attn.hook_mask"]
    for name in full.cache:
        assert torch.allclose(lean.cache[name].float(), full.cache[name].float(), atol=1e-5), name


def test_a_hook_that_edits_a_shared_tensor_in_place_is_seen_at_its_own_name_only(models):
    """resid_post of block 0 is resid_pre of block 1 (one tensor passed on): a hook there that doubles it in place
    changes the capture at resid_pre alone, in the lean capture as in the full one."""
    hm = models["qwen2"]

    def double(x, hook):
        x.mul_(2)
    hooks = [("decoder.1.hook_resid_pre", double)]
    lean = hm.run(TEXT, target="", names_filter=shown_captures, fwd_hooks=hooks, lean=True)
    full = hm.run(TEXT, target="", names_filter=shown_captures, fwd_hooks=hooks)
    post, pre = lean.cache["decoder.0.hook_resid_post"], lean.cache["decoder.1.hook_resid_pre"]
    assert torch.equal(pre, 2 * post) and not torch.equal(pre, post)
    for name in ("decoder.0.hook_resid_post", "decoder.1.hook_resid_pre", "decoder.1.hook_resid_post"):
        assert torch.equal(lean.cache[name], full.cache[name]), name


@pytest.mark.parametrize("name", ["tiny-lm", "qwen2"])
def test_an_intervened_run_and_its_forced_logits(models, monkeypatch, name):
    """A head knocked out, a given target (the knock-out page's runs): the lean run's rows and forced_logits are
    the full capture's and the plain forward's under the same hooks."""
    hm = models[name]
    from viz_transformer.core.batch import forward
    hooks = interventions.head_ablation_hooks([("decoder.0.self_attn", 1)], "zero", cfg=hm.cfg)
    text = TEXT if hm.cfg.max_len > 64 else TEXT[:40]
    with monkeypatch.context() as m:
        m.setattr(row_logits, "ROWS", STEP)
        lean = hm.run(text, target=" the end", names_filter=shown_captures, fwd_hooks=hooks, lean=True)
        off = forced.forced_logits(hm, lean, hooks)
    full = hm.run(text, target=" the end", names_filter=shown_captures, fwd_hooks=hooks)
    plain = forward(hm.model, full.batch(), hooks)[0][0]
    assert isinstance(lean.logits, RowLogits) and isinstance(off, RowLogits)
    assert torch.equal(full.logits, plain) and not torch.allclose(plain, forward(hm.model, full.batch())[0][0])
    assert torch.allclose(lean.logits.full(), plain, atol=1e-5) and torch.allclose(off.full(), plain, atol=1e-5)
    assert lean.predicted_ids == full.predicted_ids and off.predicted_ids == full.predicted_ids
    ids, start = forced.output_labels(full)
    banned = forced.never_generated(hm.tokenizer)
    assert torch.allclose(forced.token_probabilities(off, ids, start, banned),
                          forced.token_probabilities(plain, ids, start, banned), atol=1e-6)
