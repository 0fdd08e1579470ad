"""greedy_check.greedy_checked against decoding itself: a given output is accepted exactly when token-by-token greedy
decoding gives it; and the order test that checks its expectation equals the one that decodes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from viz_transformer import load_checkpoint
from viz_transformer.run import interventions, permute
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input
from viz_transformer.run.greedy_check import greedy_checked
from viz_transformer.run.logit_rules import never_generated

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["我们明天在学校门口见面，然后一起去北京看朋友。", "我是一名工程师。", "你好"]


def decoded(hm, inp, n, hooks=()):
    return decode_input(hm.model, hm.tokenizer, inp, DecodeSettings(max_new_tokens=n), hooks=hooks).generated_ids


@pytest.mark.parametrize("name", ["zh-en", "zh-en-postnorm"])
@pytest.mark.parametrize("positions", [True, False])
def test_decodings_own_output_passes_and_any_change_fails(name, positions):
    hm = load_checkpoint(ROOT / "checkpoints" / name)
    hooks = () if positions else interventions.positions_off_hooks(hm)
    banned = never_generated(hm.tokenizer)
    for text in TEXTS:
        inp = hm.run(text, max_new_tokens=1).input
        for n in (64, 5):                                        # 5: a limit the output reaches before its end
            ids = decoded(hm, inp, n, hooks)
            assert greedy_checked(hm.model, inp, ids, n, banned, hooks) == ids
            if ids:
                wrong = ids[:-1] + [(ids[-1] + 1) % hm.cfg.out_vocab]
                assert greedy_checked(hm.model, inp, wrong, n, banned, hooks) is None
                assert greedy_checked(hm.model, inp, ids[:-1], n, banned, hooks) is None    # stops too soon
            if len(ids) < n:
                assert greedy_checked(hm.model, inp, ids + [ids[0] if ids else 5], n, banned, hooks) is None  # too long


@pytest.mark.parametrize("positions", [True, False])
def test_the_order_test_with_an_expected_output_equals_the_one_that_decodes(positions):
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en-postnorm")
    hooks = () if positions else interventions.positions_off_hooks(hm)
    run = hm.run(TEXTS[0], fwd_hooks=hooks)
    checked = permute.order_test(hm, run.input, "reverse", hooks, same_output=run.output_ids)
    full = permute.order_test(hm, run.input, "reverse", hooks)
    assert torch.equal(checked.outputs, full.outputs) and torch.equal(checked.permuted_outputs, full.permuted_outputs)
    assert (checked.output, checked.permuted_output, checked.gap) == (full.output, full.permuted_output, full.gap)


def test_a_model_whose_steps_read_more_than_their_logits_is_left_to_decoding(tiny_translator):
    import dataclasses
    import types
    hm = tiny_translator
    inp = hm.run(TEXTS[1], max_new_tokens=1).input
    ids = decoded(hm, inp, 8)
    banned = never_generated(hm.tokenizer)
    assert greedy_checked(hm.model, inp, ids, 8, banned) == ids
    for change in ({"repetition_penalty": 1.3}, {"forced_eos": True}):
        other = types.SimpleNamespace(cfg=dataclasses.replace(hm.cfg, **change))
        assert greedy_checked(other, inp, ids, 8, banned) is None
