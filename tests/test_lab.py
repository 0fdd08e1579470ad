"""viz_transformer.lab against independent references: probabilities by an explicit softmax, forced logits
against the model's own forward, the order test against a permutation of the outputs."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from viz_transformer import load_checkpoint
from viz_transformer.run import forced
from viz_transformer.run import permute
from viz_transformer.core.hook_names import per_head
from viz_transformer.run.logit_rules import never_generated
from viz_transformer.run.interventions import head_ablation_hooks, positions_off_hooks

TEXT = "我是一名工程师。"


def test_token_probabilities_match_an_explicit_softmax():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 11, generator=g) * 3
    ids, start, banned = [4, 0, 10], 2, [1, 3]
    got = forced.token_probabilities(logits, ids, start, banned)
    for t, i in enumerate(ids):
        row = logits[start + t].tolist()
        z = sum(math.exp(v) for j, v in enumerate(row) if j not in banned)
        assert got[t].item() == pytest.approx(math.exp(row[i]) / z, rel=1e-5)
    assert forced.token_probabilities(logits, [1], 0, banned).item() == 0.0          # a banned id is never chosen
    with pytest.raises(ValueError, match="logit rows"):
        forced.token_probabilities(logits, [1, 2, 3], 4, banned)


def test_forced_logits_are_the_runs_logits_and_the_hooked_forward(tiny_translator, tiny_lm):
    for hm in (tiny_translator, tiny_lm):
        run = hm.run(TEXT if hm.cfg.is_encoder_decoder else "The cat sat.", max_new_tokens=6)
        assert torch.allclose(forced.forced_logits(hm, run), run.logits, atol=1e-5)
        ids, start = forced.output_labels(run)
        assert ids[: len(run.output_ids)] == run.output_ids and start == run.prompt_len - 1
        assert len(run.tgt_ids) >= start + len(ids)                # every label has a logit row
        prefix = "decoder.0.self_attn"
        hooks = head_ablation_hooks([(prefix, 1)], "zero")

        def zero_head(z, hook):                                    # [batch, q, head, d_head]
            z = z.clone()
            z[:, :, 1] = 0
            return z
        if hm.cfg.is_encoder_decoder:
            ref = hm.model.run_with_hooks(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]),
                                          fwd_hooks=[(f"{prefix}.hook_z", zero_head)])[0]
        else:
            ref = hm.model.run_with_hooks(torch.tensor([run.tgt_ids]), fwd_hooks=[(f"{prefix}.hook_z", zero_head)])[0]
        got = forced.forced_logits(hm, run, hooks)
        assert torch.allclose(got, ref, atol=1e-5) and not torch.allclose(got, run.logits, atol=1e-4)


def test_permutation_moves_pieces_and_keeps_specials():
    ids = [2, 10, 11, 12, 3]
    assert permute.permutation(ids, {2, 3}, "reverse") == [0, 3, 2, 1, 4]
    assert permute.permutation(ids, {2, 3}, "swap") == [0, 3, 2, 1, 4]
    assert permute.permutation([10, 11, 12, 13, 3], {2, 3}, "swap") == [3, 1, 2, 0, 4]
    with pytest.raises(ValueError, match="at least 2"):
        permute.permutation([10, 3], {2, 3})
    with pytest.raises(ValueError, match="unknown permutation"):
        permute.permutation(ids, {2, 3}, "shuffle")


def test_multiset_gap():
    a = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    assert permute.multiset_gap(a, a[[4, 2, 0, 1, 3]]) == 0.0
    b = a.clone()
    b[2, 1] += 100.0                                   # far from every row: its nearest row is a[2]
    assert permute.multiset_gap(a, b) == pytest.approx(100.0, rel=1e-4)
    with pytest.raises(ValueError, match="shapes"):
        permute.multiset_gap(a, a[:3])


def test_multiset_gap_equals_the_definition_by_brute_force():
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(40, 16, generator=g), torch.randn(40, 16, generator=g)
    nearest = lambda xs, ys: max(min(float((x - y).abs().max()) for y in ys) for x in xs)   # every pair, by loops
    assert permute.multiset_gap(a, b) == pytest.approx(max(nearest(a, b), nearest(b, a)), rel=1e-6)


def test_order_test_without_positions_permutes_the_encoder_outputs(tiny_translator):
    hm = tiny_translator
    off = permute.order_test(hm, TEXT, "reverse", positions_off_hooks(hm), max_new_tokens=4)
    on = permute.order_test(hm, TEXT, "reverse", max_new_tokens=4)
    assert off.part == "encoder" and off.permuted_pieces == [off.pieces[i] for i in off.order]
    assert off.pieces[-1] == "[end]" and off.permuted_pieces[-1] == "[end]"
    # reference: the outputs of the permuted input are the original outputs, permuted the same way
    assert torch.allclose(off.permuted_outputs, off.outputs[off.order], atol=1e-5)
    assert off.gap < 1e-4
    assert not torch.allclose(on.permuted_outputs, on.outputs[on.order], atol=1e-3) and on.gap > 1e-3
    full = hm.run(TEXT, names_filter=lambda n: n == "encoder.1.hook_resid_post", max_new_tokens=4)
    assert torch.allclose(on.outputs, full.cache["encoder.1.hook_resid_post"][0], atol=1e-5)


def test_order_test_on_a_causal_decoder_still_sees_order(tiny_lm):
    hm = tiny_lm
    off = permute.order_test(hm, "The cat sat on the mat.", "swap", positions_off_hooks(hm), max_new_tokens=4)
    assert off.part == "decoder" and off.pieces[0] == "[begin]" == off.permuted_pieces[0]
    assert off.gap > 1e-3                     # the causal mask carries order even without positions


def test_ranking_grid():
    df = pd.DataFrame({"block": ["encoder.0.self_attn", "encoder.1.self_attn", "decoder.1.cross_attn"],
                       "layer": [0, 1, 1], "head": [1, 0, 2], "delta_logprob": [-1.5, 0.25, -3.0]})
    g = per_head(df, "encoder.self_attn", "delta_logprob", 2, 3)
    assert g[0, 1] == -1.5 and g[1, 0] == 0.25 and int(torch.isnan(g).sum()) == 4
    assert per_head(df, "decoder.cross_attn", "delta_logprob", 2, 3)[1, 2] == -3.0


def test_probabilities_before_and_after_an_ablation(tiny_translator):
    hm = tiny_translator
    run = hm.run(TEXT, max_new_tokens=6)
    ids, start = forced.output_labels(run)
    banned = never_generated(hm.tokenizer)
    before = forced.token_probabilities(run.logits, ids, start, banned)
    ref = torch.softmax(run.logits.index_fill(-1, torch.tensor(banned), float("-inf")), -1)
    assert torch.allclose(before, torch.stack([ref[start + t, i] for t, i in enumerate(ids)]), atol=1e-6)
    after = forced.token_probabilities(forced.forced_logits(hm, run, head_ablation_hooks(
        [("decoder.0.cross_attn", 0), ("decoder.1.cross_attn", 0)], "uniform")), ids, start, banned)
    assert after.shape == before.shape and not torch.allclose(after, before, atol=1e-5)


def test_permutation_keeps_punctuation_and_a_lone_word_mark_in_place():
    pieces = ["\u2581", "医生", "帮助", "了", "病人", "。", "[end]"]
    assert permute.word_free(pieces[:-1]) == [0, 5]
    ids = [10, 11, 12, 13, 14, 15, 3]
    assert permute.permutation(ids, {3}, "swap", keep=[0, 5]) == [0, 4, 2, 3, 1, 5, 6]
    assert permute.permutation(ids, {3}, "reverse", keep=[0, 5]) == [0, 4, 3, 2, 1, 5, 6]


@pytest.mark.parametrize("folder", ["tiny-zh-en", "tiny-lm"])
def test_the_order_test_s_own_output_is_the_run_s_so_the_app_reuses_it(ckpt_root, folder):
    """The app hands order_test the cached run's output instead of decoding the same ids again: that is
    only right if a run under the same hooks generates exactly what order_test's own greedy decode does."""
    hm = load_checkpoint(ckpt_root / folder)
    text = TEXT if hm.cfg.is_translator else "The cat sat on the mat."
    for hooks in ((), positions_off_hooks(hm)):
        assert permute.order_test(hm, text, "swap", hooks).output == hm.run(text, fwd_hooks=hooks).output
        given = permute.order_test(hm, text, "swap", hooks, output="given")
        assert given.output == "given" and given.permuted_output == permute.order_test(hm, text, "swap", hooks).permuted_output
