"""A text longer than a heatmap holds at readable cells (figure_rules.max_cells) on the attention, rollout and
knock-out pages: the figure shows a window, and its cells are the same slice of the whole pattern, rollout or
knock-out computed here in full (the checkpoint run directly with every capture, summaries.rollout's T × T
product); a short text shows everything with no window slider. Through AppTest, in both languages."""
from __future__ import annotations

import html

import numpy as np
import pytest

from app_util import array, by_key, figure, figures, open_app, texts
from viz_transformer import load_checkpoint
from viz_transformer.analysis import patterns, summaries
from viz_transformer.plots import figure_rules
from viz_transformer.run.interventions import head_ablation_hooks
from viz_explorer.kit.callbacks import ko_cell

LONG = "Once upon a time there was a dog. The dog was happy and it ran to the park. " * 2   # 64 pieces on tiny-lm
LONG_ZH = "我是一名工程师。" * 5 + "他是我的朋友。" + "我是一名工程师。" * 4                       # 64 source pieces
SHORT = "我是一名工程师。"
W = figure_rules.max_cells()
ATTENTION, ROLLOUT, KNOCKOUT = ("viz_explorer/pages/look/attention.py", "viz_explorer/pages/experiment/rollout.py",
                                "viz_explorer/pages/experiment/knockout.py")


def labels(pieces, start):
    return [html.escape(f"{i}:{p}", quote=False) for i, p in enumerate(pieces, start=start)]


def move(at, key: str, start: int):
    by_key(at.slider, key).set_value(start)
    at.run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    return at


def sliders(at) -> set:
    return {s.key for s in at.slider}


@pytest.mark.parametrize("lang", [None, "zh"])
def test_the_attention_window_is_the_slice_of_the_whole_pattern(env, lang):
    run = load_checkpoint(env / "tiny-lm").run(LONG)
    whole = run.cache["decoder.1.self_attn.hook_pattern"][0]                     # (H, T, T)
    assert len(run.tgt_pieces) > W
    at = open_app(ATTENTION, ckpt="tiny-lm", text=LONG, lang=lang)
    by_key(at.selectbox, "at_layer").set_value(1)
    by_key(at.selectbox, "at_head").set_value(2)
    move(at, "at_window", 7)
    heat = figures(at)[0]
    z = array(heat["data"][0]["z"])
    assert z.shape == (W, W)
    assert np.allclose(z, whole[2, 7:7 + W, 7:7 + W], atol=1e-6)
    assert heat["data"][0]["x"] == labels(run.tgt_pieces[7:7 + W], 7)
    assert f"7–{6 + W}" in texts(at)                                                # the window note names the rows
    # the model view: every head's tile is the same window, max-pooled to the tile size
    tiles = patterns.model_view_tiles(whole[None, :, 7:7 + W, 7:7 + W], 32)[0]
    canvas = array(figures(at)[1]["data"][0]["z"])
    th, gap = tiles[0].shape[0], max(1, tiles[0].shape[0] // 8)
    for h, tile in enumerate(tiles):
        got = canvas[th + gap:2 * th + gap, h * (tile.shape[1] + gap):h * (tile.shape[1] + gap) + tile.shape[1]]
        assert np.allclose(got, tile, atol=1e-6), h
    at.session_state["at_words"] = True                                           # words: the whole layer, windowed
    at.run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]


def test_a_short_text_shows_everything_without_a_window(env):
    run = load_checkpoint(env / "tiny-zh-en").run(SHORT)
    for page in (ATTENTION, ROLLOUT, KNOCKOUT):
        at = open_app(page)
        assert not any(k and k.endswith("window") for k in sliders(at)), page
    at = open_app(ATTENTION)
    assert np.allclose(array(figures(at)[0]["data"][0]["z"]), run.cache["encoder.0.self_attn.hook_pattern"][0, 0],
                       atol=1e-6)
    at = open_app(ROLLOUT)
    assert np.allclose(array(figure(at, "Rollout of the encoder")["data"][0]["z"]),
                       summaries.rollout(run.cache, "encoder"), atol=1e-6)
    assert "Download as CSV" in [b.label for b in at.get("download_button")]


@pytest.mark.parametrize("lang", [None, "zh"])
def test_rollout_windows_are_slices_of_the_whole_rollout(env, lang):
    run = load_checkpoint(env / "tiny-lm").run(LONG)
    at = move(open_app(ROLLOUT, ckpt="tiny-lm", text=LONG, lang=lang), "ro_decoder_window", 9)
    z = array(figures(at)[0]["data"][0]["z"])
    assert np.allclose(z, summaries.rollout(run.cache, "decoder")[9:9 + W, 9:9 + W], atol=1e-6)
    if lang is None:
        assert f"Download rows 9–{8 + W} as CSV (every key)" in [b.label for b in at.get("download_button")]
    # a translator: the encoder's rollout and the attribution's source columns scroll; its 17 target rows stay
    tr = load_checkpoint(env / "tiny-zh-en").run(LONG_ZH)
    at = move(move(open_app(ROLLOUT, text=LONG_ZH, lang=lang), "ro_encoder_window", 5), "ro_attr_window", 3)
    attr, enc = figures(at)[:2]
    assert np.allclose(array(enc["data"][0]["z"]), summaries.rollout(tr.cache, "encoder")[5:5 + W, 5:5 + W], atol=1e-6)
    expected = summaries.source_attribution(tr.cache)[:, 3:3 + W]
    assert expected.shape[0] < W and np.allclose(array(attr["data"][0]["z"]), expected, atol=1e-6)


def test_the_knock_out_window_is_the_slice_of_the_knocked_out_run(env):
    hm = load_checkpoint(env / "tiny-lm")
    run = hm.run(LONG, fwd_hooks=head_ablation_hooks([("decoder.0.self_attn", 1)], "zero", cfg=hm.cfg))
    at = open_app(KNOCKOUT, ckpt="tiny-lm", text=LONG)
    at.session_state["ko_pick_decoder.self_attn"] = [ko_cell(0, 1)]
    by_key(at.selectbox, "ko_layer").set_value(1)
    move(at, "ko_window", 4)
    z = array(figure(at, "After knock-out")["data"][0]["z"])
    assert np.allclose(z, run.cache["decoder.1.self_attn.hook_pattern"][0, 0, 4:4 + W, 4:4 + W], atol=1e-6)
    untouched = hm.run(LONG).cache["decoder.1.self_attn.hook_pattern"][0, 0, 4:4 + W, 4:4 + W]
    assert not np.allclose(z, untouched, atol=1e-4)                              # the knock-out is in it


def test_the_masks_tab_windows_the_causal_and_prefix_masks(env):
    from app_util import open_tab
    from viz_transformer.core.masks import causal_mask, prefix_lm_mask
    run = load_checkpoint(env / "tiny-lm").run(LONG)
    T = len(run.tgt_pieces)
    at = open_tab(open_app("viz_explorer/pages/look/masks.py", ckpt="tiny-lm", text=LONG), "mk", "causal")
    move(move(at, "mk_causal_window", 6), "mk_prefix_window", 2)
    causal, prefix = figures(at)[:2]
    assert np.array_equal(array(causal["data"][0]["z"]) != 0, causal_mask(T)[0, 0, 6:6 + W, 6:6 + W].numpy())
    assert causal["data"][0]["y"] == labels(run.tgt_pieces[6:6 + W], 6)
    p = by_key(at.slider, "mk_prefix").value
    assert np.array_equal(array(prefix["data"][0]["z"]) != 0, prefix_lm_mask(T, p)[0, 0, 2:2 + W, 2:2 + W].numpy())
    short = open_tab(open_app("viz_explorer/pages/look/masks.py"), "mk", "causal")
    assert not any(k and k.endswith("window") for k in sliders(short))
