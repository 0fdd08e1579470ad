"""The attention and step-by-step pages through AppTest: heatmaps, word level, the line view's
windows and the stage-by-stage recompute, against the checkpoint run directly (see app_util)."""
from __future__ import annotations

import html

import numpy as np
import torch

from app_util import ROOT, ZH, array, by_key, figure, figures, open_app, open_tab, texts
from viz_transformer import load_checkpoint
from viz_transformer.plots import figure_rules
from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.core.tokenizer import group_words


def esc(label: str) -> str:
    """Labels as plotly receives them: <, > and & as entities (byte pieces look like <0x50>)."""
    return html.escape(label, quote=False)


# -- attention: heads and layers -----------------------------------------------------------------
def test_attention_heatmap_follows_head_and_layer(env):
    at = open_app("viz_explorer/pages/look/attention.py")
    run = load_checkpoint(env / "tiny-zh-en").run(ZH)
    f = figure(at, "encoder self-attention, layer 0, head 0")
    assert np.allclose(array(f["data"][0]["z"]), run.cache["encoder.0.self_attn.hook_pattern"][0, 0], atol=1e-6)
    assert f["data"][0]["x"] == [f"{i}:{p}" for i, p in enumerate(run.src_pieces)]
    assert f["layout"]["xaxis"]["title"]["text"] == "key (attended to)"
    assert f["layout"]["yaxis"]["title"]["text"] == "query (attending)"

    by_key(at.selectbox, "at_layer").set_value(1)
    by_key(at.selectbox, "at_head").set_value(3)
    at.run(timeout=60)
    f = figure(at, "encoder self-attention, layer 1, head 3")
    assert np.allclose(array(f["data"][0]["z"]), run.cache["encoder.1.self_attn.hook_pattern"][0, 3], atol=1e-6)
    # the model view outlines the open head
    mv = figure(at, "all layers × heads")
    assert len(mv["layout"]["shapes"]) == 1

    by_key(at.selectbox, "at_block").set_value("decoder.cross_attn")
    by_key(at.selectbox, "at_head").set_value("max")
    at.run(timeout=60)
    f = figure(at, "cross-attention (decoder → encoder), layer 1, max over heads")
    ref = run.cache["decoder.1.cross_attn.hook_pattern"][0].max(0).values
    assert np.allclose(array(f["data"][0]["z"]), ref, atol=1e-6)
    assert len(f["data"][0]["y"]) == len(run.tgt_pieces) and len(f["data"][0]["x"]) == len(run.src_pieces)


def test_attention_word_level_toggle(env):
    text = "I am an engineer."
    at = open_app("viz_explorer/pages/look/attention.py", ckpt="tiny-lm", text=text)
    run = load_checkpoint(env / "tiny-lm").run(text)
    n_pieces = len(run.tgt_pieces)
    assert len(figure(at, "layer 0, head 0")["data"][0]["x"]) == n_pieces
    by_key(at.toggle, "at_words").set_value(True)
    at.run(timeout=60)
    f = figure(at, "layer 0, head 0")
    groups = group_words(run.tgt_pieces)
    assert len(f["data"][0]["x"]) == len(groups)
    z = array(f["data"][0]["z"])
    assert np.allclose(z.sum(-1), 1, atol=1e-5)


def test_max_over_heads_at_word_level_groups_each_head_before_the_max(env):
    text = "I am an engineer."
    at = open_app("viz_explorer/pages/look/attention.py", ckpt="tiny-lm", text=text)
    by_key(at.selectbox, "at_head").set_value("max")
    by_key(at.toggle, "at_words").set_value(True)
    at.run(timeout=60)
    run = load_checkpoint(env / "tiny-lm").run(text)
    pat = run.cache["decoder.0.self_attn.hook_pattern"][0].double()          # (H, q, k)
    groups = group_words(run.tgt_pieces)
    assert any(len(g) > 1 for g in groups)                                    # words of several pieces
    # by hand, per head: a word's key pieces summed, its query pieces averaged; then the max over heads
    per_head = torch.tensor([[[float(pat[h][qg][:, kg].sum(-1).mean()) for kg in groups] for qg in groups]
                             for h in range(pat.shape[0])])
    z = array(figure(at, "layer 0, max over heads")["data"][0]["z"])
    assert np.allclose(z, per_head.max(0).values, atol=1e-5)
    assert z.max() <= 1 + 1e-6                                                # a weight, as the colour scale says


def test_line_view_draws_the_chosen_heads(env):
    at = open_app("viz_explorer/pages/look/attention.py")
    f = figure(at, "lines from queries")
    assert [a["text"] for a in f["layout"]["annotations"]] == ["head 0"]
    by_key(at.multiselect, "at_line_heads_0").set_value([0, 2])
    at.run(timeout=60)
    f = figure(at, "lines from queries")
    assert [a["text"] for a in f["layout"]["annotations"]] == ["head 0", "head 2"]


def test_line_view_of_cross_attention_keeps_every_query_while_the_keys_scroll(env):
    text = "我们明天早上八点在学校门口见面，然后一起坐火车去北京。" * 2
    run = load_checkpoint(env / "tiny-zh-en").run(text)
    T, S, W = len(run.tgt_pieces), len(run.src_pieces), 48                  # W: the page's line window
    assert T < W < S
    at = open_app("viz_explorer/pages/look/attention.py", text=text)
    by_key(at.selectbox, "at_block").set_value("decoder.cross_attn").run(timeout=60)
    by_key(at.slider, "at_line_start").set_value(S - W).run(timeout=60)
    f = figure(at, "lines from queries")
    columns = [tr["text"] for tr in f["data"] if tr.get("mode") == "text"]
    rows = piece_labels.query_labels(run, "decoder.cross_attn")                               # "▁an → ▁engineer"
    assert columns[0] == [esc(f"{i}:{p}") for i, p in enumerate(rows)]                    # every query
    assert columns[1] == [esc(f"{j}:{run.src_pieces[j]}") for j in range(S - W, S)]      # the last W keys
    shown = run.cache["decoder.0.cross_attn.hook_pattern"][0, 0][:, S - W:]
    n_lines = sum(list(tr["y"]).count(None) for tr in f["data"] if tr.get("mode") == "lines")
    assert n_lines == min(300, int((shown >= 0.05).sum()))                   # the page's cap and threshold


# -- attention step by step ---------------------------------------------------------------------
def test_step_by_step_agrees_with_pytorch_sdpa_and_reacts_to_the_divisor(env):
    """The page's stages against an implementation that is not ours: PyTorch's scaled_dot_product_attention
    (its own default 1/√d_k) on the captured q, k, v and mask. Not against the captured hook_pattern: an app
    run is compacted, and its pattern is recomputed on read by the same attention() the page uses."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    at = open_app("viz_explorer/pages/step/step_by_step.py")
    assert figure(at, "Q: queries") and not any("softmax" in f["layout"]["title"]["text"] for f in figures(at))
    run = load_checkpoint(env / "tiny-zh-en").run(ZH)
    q, k, v, mask = patterns.head_qkv(run.cache, "decoder.self_attn", 0, 0)
    ref = sdpa(q, k, torch.eye(len(k)), attn_mask=mask)                  # SDPA on an identity V: the weights
    open_tab(at, "st", "scores")
    assert at.metric[0].label.startswith("These step-by-step weights vs PyTorch's own scaled_dot_product_attention")
    assert float(at.metric[0].value) < 1e-5
    z = array(figure(at, "softmax over each row")["data"][0]["z"])      # a window of at most 40 positions
    assert np.allclose(z, ref[: len(z), : z.shape[1]], atol=1e-5)
    open_tab(at, "st", "output")
    out = array(figure(at, "this head's output")["data"][0]["z"])
    assert np.allclose(out, sdpa(q, k, v, attn_mask=mask)[: len(out)], atol=1e-5)

    slider = next(s for s in at.slider if s.key.startswith("st_div_"))
    slider.set_value(0.2)
    open_tab(at, "st", "scores")
    sharp = array(figure(at, "softmax over each row")["data"][0]["z"])
    ref = torch.softmax((q @ k.T / 0.2).masked_fill(~mask, float("-inf")), -1)
    assert np.allclose(sharp, ref[: len(sharp), : sharp.shape[1]], atol=1e-5)
    assert "both dividing by 0.20" in at.metric[0].label and float(at.metric[0].value) < 1e-5
    assert "You changed the divisor" in texts(at)
    open_tab(at, "st", "why")
    assert figure(at, "Variance of q·k")


def test_step_by_step_window_names_the_query_rows_and_key_columns_it_shows(env):
    text = "我是一名工程师。" * 14
    run = load_checkpoint(env / "tiny-zh-en").run(text)
    T, S, W = len(run.tgt_pieces), len(run.src_pieces), figure_rules.max_cells()     # W: the page's window
    assert T < W < S
    at = open_app("viz_explorer/pages/step/step_by_step.py", text=text)
    by_key(at.selectbox, "st_block").set_value("decoder.cross_attn").run(timeout=60)
    by_key(at.slider, "st_start").set_value(S - W).run(timeout=60)
    open_tab(at, "st", "scores")
    f = figure(at, "softmax over each row")
    assert f["data"][0]["y"] == [esc(f"{i}:{p}") for i, p in enumerate(piece_labels.query_labels(run, "decoder.cross_attn"))]
    assert f["data"][0]["x"] == [esc(f"{j}:{run.src_pieces[j]}") for j in range(S - W, S)]
    ref = run.cache["decoder.0.cross_attn.hook_pattern"][0, 0][:, S - W:]
    assert np.allclose(array(f["data"][0]["z"]), ref, atol=1e-5)
    assert f"query rows 0–{T - 1} and key columns {S - W}–{S - 1}" in texts(at)


def test_the_attention_page_names_each_decoder_row_by_what_it_predicts():
    """The shipped zh-en on 我是一名工程师。: the cross-attention row of ▁an is where the model chose ▁engineer."""
    at = open_app("viz_explorer/pages/look/attention.py", ckpt="zh-en")
    assert "the row ▁an → ▁engineer is where the model chose ▁engineer" in texts(at)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(ROOT / "checkpoints" / "zh-en" / "tokenizer.model"))
    assert "".join(sp.encode("我是一名工程师。", out_type=str)) == "▁我是一名工程师。"   # SentencePiece's own pieces
    src = [*"我是一名工程师。", "[end]"]                    # one character a piece; the ▁ of the text's start not shown
    f = figure(at, "encoder self-attention, layer 0, head 0")
    assert f["data"][0]["y"] == [f"{i}:{p}" for i, p in enumerate(src)]      # encoder rows stay plain
    by_key(at.selectbox, "at_block").set_value("decoder.cross_attn").run(timeout=60)
    f = figure(at, "cross-attention (decoder → encoder), layer 0, head 0")
    out = ["[begin]"] + sp.encode("I'm an engineer.", out_type=str) + ["[end]"]     # the model's greedy output
    assert f["data"][0]["y"] == [f"{i}:{a} → {b}" for i, (a, b) in enumerate(zip(out, out[1:]))]
    assert f["layout"]["yaxis"]["title"]["text"] == "query → prediction"
    assert "query → prediction: %{y}" in f["data"][0]["hovertemplate"]


def test_step_through_decoding_in_chinese_names_the_row_being_decoded():
    from streamlit.testing.v1 import AppTest
    from app_util import APP
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["lang"] = "zh"
    at.session_state["ckpt"], at.session_state["text"] = "zh-en", ZH
    at.run(timeout=90)
    at.switch_page("viz_explorer/pages/step/decoding.py")
    at.run(timeout=90)
    for _ in range(5):                                     # step 5 chose ▁engineer from the row of ▁an
        at.button(key="dc_next").click().run(timeout=90)
    assert not at.exception, [e.value for e in at.exception]
    assert "▁an → ▁engineer 这一行就是模型选出 ▁engineer 的那一步" in texts(at)
    assert figure(at, "最新查询（▁an → ▁engineer）在源序列上的交叉注意力")
