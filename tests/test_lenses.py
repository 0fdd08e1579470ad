"""The logit lens against independent references: the model's own logits (last row), a model cut after
layer l (row l), and a model whose later block was made an identity (equal rows)."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from viz_transformer import load_checkpoint
from viz_transformer.run.lenses import first_row_known, lens_from_ids, lens_names, lens_view, logit_lens

TEXTS = {"encoder_decoder": "我是一名工程师。", "decoder_only": "The cat sat on the mat.", "prefix_lm": "I love you."}


def _run(hm, **kw):
    return hm.run(TEXTS[hm.cfg.architecture], max_new_tokens=6, **kw)


@pytest.mark.parametrize("name", ["tiny-zh-en", "tiny-lm", "tiny-prefix", "zh-en"])
def test_last_row_is_the_models_own_output(models, zh_en, name):
    hm = zh_en if name == "zh-en" else models[name]
    run = hm.run(TEXTS[hm.cfg.architecture], max_new_tokens=6)
    lp = logit_lens(hm, run)
    assert lp.shape == (hm.cfg.n_decoder_layers + 1, len(run.tgt_ids), hm.cfg.vocab_size)
    own = torch.log_softmax(run.logits.float(), -1)
    # the same values to float rounding: the lens reads every row out in one product, the forward the last alone,
    # and on some CPUs (AVX-512) the two shapes take different kernel blocks (up to 7e-6 apart, zh-en)
    torch.testing.assert_close(lp[-1], own, atol=1e-5, rtol=0)
    assert torch.equal(lp[-1].argmax(-1), own.argmax(-1))                 # the same piece ranked first everywhere


@torch.no_grad()
def _cut_after(hm, n: int, run) -> torch.Tensor:
    """log-probabilities of a copy of the model that keeps only its first n decoder blocks."""
    model = copy.deepcopy(hm.model)
    model.decoder = nn.ModuleList(list(model.decoder)[:n])
    if hm.cfg.is_encoder_decoder:
        out = model(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]))
    else:
        out = model(torch.tensor([run.tgt_ids]), prefix_len=run.prefix_len)
    return torch.log_softmax(out[0], -1)


@pytest.mark.parametrize("name", ["tiny-zh-en", "tiny-lm", "tiny-prefix"])
def test_each_row_is_the_model_cut_after_that_layer(models, name):
    hm = models[name]                       # tiny-lm is post-norm: its final norm is inside the blocks
    run = _run(hm)
    lp = logit_lens(hm, run)
    for n in range(hm.cfg.n_decoder_layers + 1):
        assert torch.allclose(lp[n], _cut_after(hm, n, run), atol=1e-5), n
    assert not torch.allclose(lp[0], lp[-1], atol=1e-3)          # the rows do differ: the test can fail


@torch.no_grad()
def test_an_identity_block_gives_equal_rows(ckpt_root):
    hm = load_checkpoint(ckpt_root / "tiny-zh-en")              # pre-norm: block = x + f(LN(x))
    block = hm.model.decoder[1]
    for lin in (block.self_attn.W_O, block.cross_attn.W_O, block.ff.W_out):
        lin.weight.zero_()
        lin.bias.zero_()
    lp = logit_lens(hm, _run(hm))                               # rows: embeddings, layer 0, layer 1
    assert torch.allclose(lp[1], lp[2], atol=1e-6)
    assert not torch.allclose(lp[0], lp[1], atol=1e-3)


def test_without_captured_streams_the_lens_reruns_the_same_ids(models):
    for hm in models.values():
        full, bare = _run(hm), _run(hm, names_filter=[])
        assert len(bare.cache) == 0
        assert torch.allclose(logit_lens(hm, bare), logit_lens(hm, full), atol=1e-5)
        n = full.prompt_len + 1                                  # a trace's first step: the prompt + one token
        prefix = lens_from_ids(hm, full.tgt_ids[:n], full.src_ids, full.prefix_len)
        assert torch.allclose(prefix, logit_lens(hm, full)[:, :n], atol=1e-5)
    with pytest.raises(ValueError, match="source ids"):
        lens_from_ids(models["tiny-zh-en"], [2, 5])


def test_view_names_the_generated_tokens(zh_en):
    run = zh_en.run("我是一名工程师。")
    view = lens_view(zh_en, run, logit_lens(zh_en, run))
    start = run.prompt_len - 1
    assert view.output_start == start and view.rows[0] == "embeddings" and len(view.rows) == 4
    assert view.final_ids[start:] == run.trace.output_ids          # the greedy output, [end] included
    for p, i in enumerate(view.final_ids):                         # P(final) read at the last row
        assert view.final_prob[-1, p].item() == pytest.approx(torch.softmax(run.logits[p], -1)[i].item(), rel=1e-5)
    known = first_row_known(view)
    assert all(k is None or 0 <= k < len(view.rows) for k in known)
    assert known[start] is not None and int(view.top_ids[known[start], start, 0]) == view.final_ids[start]
    assert lens_names(zh_en.cfg) == ["decoder.0.hook_resid_pre", "decoder.0.hook_resid_post",
                                     "decoder.1.hook_resid_post", "decoder.2.hook_resid_post"]


def test_a_windowed_view_reads_the_same_cells_and_leaves_the_others_empty(models, zh_en):
    """lens_view(window=(a, b)) reads out positions a … b-1 only: those cells equal the full view's, the others
    are NaN and "", and every position's final token is still the full view's (from the run's logits)."""
    for hm in [zh_en, *models.values()]:
        run = _run(hm)
        full = lens_view(hm, run, logit_lens(hm, run))
        T = len(run.tgt_ids)
        a, b = 1, min(T, 4)
        part = lens_view(hm, run, window=(a, b))
        assert part.final_ids == full.final_ids and part.output_start == full.output_start
        torch.testing.assert_close(part.final_prob[:, a:b], full.final_prob[:, a:b], atol=1e-5, rtol=0)
        assert torch.equal(part.top_ids[:, a:b], full.top_ids[:, a:b])
        assert torch.isnan(part.final_prob[:, :a]).all() and torch.isnan(part.final_prob[:, b:]).all()
        assert [r[a:b] for r in part.top_pieces] == [r[a:b] for r in full.top_pieces]
        assert all(c == "" for r in part.top_pieces for c in r[0] + r[-1]) or b == T


def test_a_traces_step_lens_is_the_runs_column(models, zh_en):
    from viz_transformer import decode, DecodeSettings
    from viz_transformer.run.lenses import trace_lens
    for hm in [zh_en, *models.values()]:
        run = _run(hm)
        lp = logit_lens(hm, run)
        for step in range(len(run.trace.steps)):
            assert torch.allclose(trace_lens(hm, run.trace, step), lp[:, run.prompt_len - 1 + step], atol=1e-5)
        with pytest.raises(ValueError, match="out of range"):
            trace_lens(hm, run.trace, len(run.trace.steps))
    beam = decode(zh_en, "我是一名工程师。", DecodeSettings("beam", beam_width=3))       # any strategy's trace
    last = trace_lens(zh_en, beam, len(beam.steps) - 1)
    assert last.shape == (zh_en.cfg.n_decoder_layers + 1, zh_en.cfg.vocab_size)
