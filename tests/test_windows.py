"""A long text's windowed rows (analysis/windows.py) against full recomputes: a window of pattern rows is the
same slice of the whole pattern (the full capture's, and a lean run's head by head), a window of rollout or
source-attribution rows is the same slice of summaries.rollout / source_attribution (the whole T × T product),
on causal, prefix-LM, both-ways, grouped-query RoPE and sliding-window models."""
from __future__ import annotations

import pytest
import torch

import hf_util as H
from viz_transformer import load_checkpoint
from viz_transformer.analysis import patterns, summaries, windows

TEXT = {"tiny-zh-en": "我是一名工程师。他是我的朋友。我们是学生。",
        "tiny-lm": "Once upon a time there was a dog. The dog was happy and it ran to the park.",
        "tiny-zh-en-prefix": "我是一名工程师。他是我的朋友。我们是学生。"}
TOL = dict(atol=2e-6, rtol=1e-5)


@pytest.fixture(scope="module")
def runs(ckpt_root):
    out = {}
    for name, text in TEXT.items():
        hm = load_checkpoint(ckpt_root / name)
        out[name] = (hm.run(text), hm.run(text, lean=True))
    return out


def _blocks(run):
    return [b for b in patterns.BLOCKS if patterns.hook_name(b, 0, "hook_pattern") in run.cache]


def _windows(n: int):
    return [(0, min(n, 5)), (n // 3, n // 3 + 4), (max(0, n - 6), n), (0, n)]


@pytest.mark.parametrize("name", list(TEXT))
def test_pattern_rows_are_the_slice_of_the_whole_pattern(runs, name):
    full, lean = runs[name]
    for block in _blocks(full):
        for layer in range(2):
            whole = full.cache[patterns.hook_name(block, layer, "hook_pattern")][0]        # (H, T, S)
            for a, b in _windows(whole.shape[1]):
                for run in (full, lean):
                    got = windows.pattern_rows(run.cache, block, layer, (a, b))
                    torch.testing.assert_close(got, whole[:, a:b], **TOL)
                one = windows.pattern_rows(lean.cache, block, layer, (a, b), heads=[1])[0]
                torch.testing.assert_close(one, patterns.head_pattern(lean.cache, block, layer, 1)[a:b], **TOL)


@pytest.mark.parametrize("name", list(TEXT))
def test_chosen_pattern_rows_are_those_rows_of_the_whole_pattern(runs, name):
    full, lean = runs[name]
    for block in _blocks(full):
        whole = full.cache[patterns.hook_name(block, 1, "hook_pattern")][0]                    # (H, T, S)
        T = whole.shape[1]
        for idx in (torch.arange(T), torch.tensor([T - 1, 0]), torch.linspace(0, T - 1, min(T, 4)).round().long()):
            for run in (full, lean):
                torch.testing.assert_close(windows.pattern_rows(run.cache, block, 1, idx), whole[:, idx], **TOL)
            torch.testing.assert_close(windows.pattern_rows(lean.cache, block, 1, idx, heads=[1])[0], whole[1, idx],
                                       **TOL)


def test_stored_pattern_rows_are_a_copy(runs):
    full, _ = runs[next(iter(TEXT))]
    block = _blocks(full)[0]
    whole = full.cache[patterns.hook_name(block, 0, "hook_pattern")][0].clone()
    for rows in ((0, 2), torch.tensor([1, 0])):
        windows.pattern_rows(full.cache, block, 0, rows).fill_(7.0)
        assert torch.equal(full.cache[patterns.hook_name(block, 0, "hook_pattern")][0], whole)


def test_pattern_rows_refuse_keys_the_rows_can_see(runs):
    _, lean = runs["tiny-zh-en-prefix"]            # the prefix's rows see the whole prefix, both ways
    with pytest.raises(ValueError, match="may attend to keys past"):
        windows.pattern_rows(lean.cache, "decoder.self_attn", 0, (0, 2), n_keys=2)


@pytest.mark.parametrize("name", list(TEXT))
def test_rollout_rows_are_the_slice_of_the_whole_rollout(runs, name):
    full, lean = runs[name]
    parts = [p for p in ("encoder", "decoder") if full.cache.n_layers.get(p)]
    for part in parts:
        whole = summaries.rollout(full.cache, part)
        for a, b in _windows(whole.shape[0]):
            for run in (full, lean):
                torch.testing.assert_close(windows.rollout_rows(run.cache, part, (a, b)), whole[a:b], **TOL)


def test_source_attribution_rows_are_the_slice_of_the_whole(runs):
    full, lean = runs["tiny-zh-en"]
    whole = summaries.source_attribution(full.cache)
    for a, b in _windows(whole.shape[0]):
        for run in (full, lean):
            torch.testing.assert_close(windows.source_attribution_rows(run.cache, (a, b)), whole[a:b], **TOL)


def test_closed_prefix_is_where_the_rows_stop_reaching():
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    assert windows.closed_prefix(causal, 2) == 2
    prefix = causal.clone()
    prefix[:4, :4] = True                                  # a prefix LM's first 4 positions see each other
    assert [windows.closed_prefix(prefix, e) for e in (1, 4, 5)] == [4, 4, 5]
    assert windows.closed_prefix(torch.ones(6, 6, dtype=torch.bool), 1) == 6


@pytest.mark.parametrize("shape_id", ["qwen2-gqa2-tied-sharded", "mistral-window6-gqa1"])
def test_rows_of_a_grouped_query_rope_folder(tmp_path, shape_id):
    hm = load_checkpoint(H.build(H.SHAPE_BY_ID[shape_id], tmp_path / shape_id))
    text = "Once upon a time there was a little dog who liked to run in the park with his friends."
    full, lean = hm.run(text), hm.run(text, lean=True)
    whole = summaries.rollout(full.cache, "decoder")
    for a, b in _windows(whole.shape[0]):
        torch.testing.assert_close(windows.rollout_rows(lean.cache, "decoder", (a, b)), whole[a:b], **TOL)
        for layer in range(2):
            torch.testing.assert_close(windows.pattern_rows(lean.cache, "decoder.self_attn", layer, (a, b)),
                                       full.cache[patterns.hook_name("decoder.self_attn", layer, "hook_pattern")][0, :, a:b],
                                       **TOL)


@pytest.mark.parametrize("head", [1, "mean", "max"])
def test_a_head_window_is_the_slice_of_head_matrix(runs, head):
    from viz_transformer.analysis import sinks
    full, lean = runs["tiny-lm"]
    whole = patterns.layer_patterns(full.cache, "decoder.self_attn", 1)                     # (H, T, T)
    T = whole.shape[-1]
    for no_sink in (False, True):
        shown = sinks.without_sink(whole, [0]) if no_sink else whole
        expected = patterns.head_matrix(shown, head, ["x"] * T, ["x"] * T)[0]
        got = windows.head_window(lean.cache, "decoder.self_attn", 1, head, (3, 9), (2, 7), no_sink)
        torch.testing.assert_close(got, expected[3:9, 2:7].to(got.dtype), **TOL)
    tiles = list(windows.layer_windows(lean.cache, "decoder.self_attn", 2, (3, 9), (2, 7)))
    torch.testing.assert_close(tiles[1], whole[:, 3:9, 2:7], **TOL)
