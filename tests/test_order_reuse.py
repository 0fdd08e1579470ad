"""The Positions on/off page's order test reads the unpermuted side's encoder outputs off the cached run made under
the same hooks (viz_explorer/server/cached.py: order_test), and the permuted side's off the encoder pass its decoding
makes; each must be what a forward of its own gives, to the bit (the page shows the gap, ~0 without positions, to 3
significant digits)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from viz_transformer import load_checkpoint
from viz_transformer.run import interventions, permute
from viz_transformer.run.derived_cache import patterns_only, shown_captures

ROOT = Path(__file__).resolve().parents[1]
TEXT = "我们明天在学校门口见面，然后一起去北京看朋友。"


def both(hm, hooks, filt):
    run = hm.run(TEXT, names_filter=filt, fwd_hooks=hooks, lean=True)
    kept = permute.run_outputs(run, hm.cfg)
    assert kept is not None
    reused = permute.order_test(hm, run.input, "reverse", hooks, output=run.output, outputs=kept)
    full = permute.order_test(hm, run.input, "reverse", hooks)        # every forward and decode made again
    return reused, full


@pytest.mark.parametrize("which", ["tiny", "zh-en"])
@pytest.mark.parametrize("positions", [True, False])
def test_the_order_test_off_a_cached_run_equals_a_full_recompute(tiny_translator, which, positions):
    hm = tiny_translator if which == "tiny" else load_checkpoint(ROOT / "checkpoints" / "zh-en")
    name = permute.encoder_outputs_name(hm.cfg)
    hooks = () if positions else interventions.positions_off_hooks(hm)
    filt = shown_captures if positions else (lambda n: patterns_only(n) or n == name)   # as cached.py runs them
    reused, full = both(hm, hooks, filt)
    inp = hm.run(TEXT, max_new_tokens=1).input
    moved = inp.with_ids([inp.ids[i] for i in reused.order])
    own, permuted = permute._last_layer(hm, inp, hooks), permute._last_layer(hm, moved, hooks)   # a forward each
    for r in (reused, full):
        assert torch.equal(r.outputs, own) and torch.equal(r.permuted_outputs, permuted)
        assert r.gap == permute.multiset_gap(own, permuted)
    assert reused.order == full.order
    assert (reused.output, reused.permuted_output) == (full.output, full.permuted_output)


def test_a_one_sequence_model_has_no_outputs_to_reuse(tiny_lm):
    run = tiny_lm.run("Once upon a time", lean=True)
    assert permute.encoder_outputs_name(tiny_lm.cfg) is None and permute.run_outputs(run, tiny_lm.cfg) is None
