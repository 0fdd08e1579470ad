"""The Streamlit app through streamlit.testing.v1.AppTest, on the tiny checkpoints from conftest.

Each test asserts on what a page shows (figures' data, titles, messages) and on how it reacts to
its main controls; references come from running the checkpoint directly.
"""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from app_util import PAGES, ZH, array, by_key, figure, figures, open_app, open_tab, tables, texts
from viz_transformer import decode, DecodeSettings, load_checkpoint
from viz_transformer.core.encoding import encode_input, left_out


# -- opening, defaults, shared state ---------------------------------------------------------------
def test_default_opens_the_default_translator_with_the_chinese_example(ckpt_root, tmp_path, monkeypatch):
    from viz_explorer.server import defaults
    root = tmp_path / "checkpoints"
    shutil.copytree(ckpt_root / "tiny-lm", root / "a-lm")
    shutil.copytree(ckpt_root / "tiny-zh-en", root / "zh-en")                 # listed before the default
    shutil.copytree(ckpt_root / "tiny-zh-en", root / defaults.CHECKPOINT)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(root))
    at = open_app(ckpt=None, text=None)
    assert by_key(at.sidebar.selectbox, "ckpt").value == defaults.CHECKPOINT
    assert by_key(at.sidebar.text_area, "text").value == "我是一名工程师。"
    assert at.title[0].value == "Overview"
    assert len(tables(at)) == 3            # architecture facts, encoder pieces, decoder pieces


def test_every_page_opens_with_figures(env):
    # the figures each page (or each tab of it) promises, found by their titles (not by a count)
    expected = {("viz_explorer/pages/look/attention.py", None): ["layer 0, head 0", "all layers × heads", "lines from queries"],
                ("viz_explorer/pages/step/step_by_step.py", "qkv"): ["Q: queries", "K: keys", "V: values"],
                ("viz_explorer/pages/step/step_by_step.py", "scores"): ["Q Kᵀ", "softmax over each row"],
                ("viz_explorer/pages/step/step_by_step.py", "output"): ["this head's output", "Weights of query"],
                ("viz_explorer/pages/step/step_by_step.py", "why"): ["Variance of q·k"],
                ("viz_explorer/pages/look/masks.py", "padding"): ["Padding mask captured at", "Cross-attention mask"],
                ("viz_explorer/pages/look/masks.py", "causal"): ["Causal mask", "Prefix-LM mask"],
                ("viz_explorer/pages/look/masks.py", "applied"): ["Scores before the mask", "Scores after the mask", "Pattern after"],
                ("viz_explorer/pages/look/positional_encoding.py", None): ["Sinusoidal encoding", "Chosen dimensions over position", "PE(i)·PE(j)"],
                ("viz_explorer/pages/step/decoding.py", None): []}
    at = open_app()
    for (page, tab), titles in expected.items():
        at.switch_page(page)
        at.run(timeout=60)
        if tab:
            open_tab(at, {"viz_explorer/pages/step/step_by_step.py": "st", "viz_explorer/pages/look/masks.py": "mk"}[page], tab)
        assert not at.exception, (page, [e.value for e in at.exception])
        shown = [f["layout"]["title"]["text"] for f in figures(at)]
        for want in titles:
            assert any(want in s for s in shown), (page, tab, want, shown)
        assert bool(shown) == bool(titles), page          # the decoding page draws nothing before Next
        for f in figures(at):
            assert f["layout"]["title"]["text"]


def test_a_tabbed_page_runs_and_draws_the_open_tab_only(env):
    at = open_app("viz_explorer/pages/look/masks.py")
    open_tab(at, "mk", "causal")
    shown = [f["layout"]["title"]["text"] for f in figures(at)]
    assert len(shown) == 2 and not any("Padding" in s or "Scores" in s for s in shown), shown
    open_tab(at, "st", "why")                          # another page's tab state does not leak into this one
    assert len(figures(at)) == 2


def test_switching_pages_keeps_text_and_model(env):
    text = "The cat sat on the mat."
    pieces = ["[begin]"] + load_checkpoint(env / "tiny-lm").tokenizer.pieces(
        load_checkpoint(env / "tiny-lm").tokenizer.encode(text))
    at = open_app(ckpt="tiny-lm", text=text)
    for page in PAGES[1:]:
        at.switch_page(page)
        at.run(timeout=60)
        assert not at.exception
        assert at.session_state["ckpt"] == "tiny-lm" and at.session_state["text"] == text
        assert by_key(at.sidebar.text_area, "text").value == text
        if page == "viz_explorer/pages/look/attention.py":
            # the LM's run shows the prompt, then the continuation it generated
            run = load_checkpoint(env / "tiny-lm").run(text)
            x = figure(at, "decoder self-attention")["data"][0]["x"]
            assert x[: len(pieces)] == [f"{i}:{p}" for i, p in enumerate(pieces)]
            assert len(x) == len(run.tgt_ids) == len(pieces) + len(run.output_ids)
    assert "continues your text" in texts(at)


def test_overview_shows_pieces_ids_and_translation(env):
    at = open_app()
    hm = load_checkpoint(env / "tiny-zh-en")
    ids = hm.tokenizer.encode(ZH) + [hm.cfg.eos_id]
    src_table = tables(at)[1]
    assert list(src_table.iloc[:, 2]) == [str(i) for i in ids]
    assert list(src_table.iloc[:, 1]) == [hm.tokenizer.piece(i) for i in ids]
    assert at.text[0].value == (hm.translate([ZH])[0] or "(the model produced nothing: it ended at once)")


# -- masks ---------------------------------------------------------------------------------------
def test_masks_page_padding_causal_prefix_and_applied(env):
    at = open_app("viz_explorer/pages/look/masks.py", text="他是我的朋友，我们明天去北京。")
    pad = figure(at, "Padding mask captured at encoder.0.self_attn.hook_mask")
    z, cols = array(pad["data"][0]["z"]), pad["data"][0]["x"]
    is_pad = np.array([c.endswith(":[pad]") for c in cols])
    assert is_pad.any() and (z[:, is_pad] == 0).all() and (z[:, ~is_pad] == 1).all()
    open_tab(at, "mk", "causal")
    causal = array(figure(at, "Causal mask")["data"][0]["z"])
    assert np.array_equal(causal, np.tril(np.ones_like(causal)))
    by_key(at.slider, "mk_prefix").set_value(2)
    at.run(timeout=60)
    prefix = array(figure(at, "Prefix-LM mask, prefix = 2")["data"][0]["z"])
    assert prefix[0, 1] == 1 and prefix[1, 2] == 0 and prefix[0, 2] == 0
    # the applied decoder self-attention mask is causal, and masked scores are gaps (-inf)
    open_tab(at, "mk", "applied")
    applied = array(figure(at, "decoder.0.self_attn.hook_mask")["data"][0]["z"])
    assert np.array_equal(applied, np.tril(np.ones_like(applied)))
    after = array(figure(at, "Scores after the mask")["data"][0]["z"])
    assert np.isnan(after[np.triu_indices_from(after, 1)]).all()
    pattern = array(figure(at, "Pattern after softmax")["data"][0]["z"])
    assert (pattern[np.triu_indices_from(pattern, 1)] == 0).all()


def test_masks_page_for_a_language_model_has_no_cross_attention(env):
    at = open_app("viz_explorer/pages/look/masks.py", ckpt="tiny-lm", text="I am a student.")
    assert "A decoder-only model has no cross-attention." in texts(at)
    open_tab(at, "mk", "applied")
    assert figure(at, "decoder.0.self_attn.hook_mask")


# -- positional -----------------------------------------------------------------------------------
def test_positional_page_sinusoidal_and_learned(env):
    at = open_app("viz_explorer/pages/look/positional_encoding.py")
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert not any("Learned" in t for t in titles)
    f = figure(at, "Sinusoidal encoding")
    hm = load_checkpoint(env / "tiny-zh-en")
    from viz_transformer.core.positional import sinusoidal_table
    n = len(array(f["data"][0]["z"]))
    assert np.allclose(array(f["data"][0]["z"]), sinusoidal_table(n, hm.cfg.d_model), atol=1e-6)
    slider = next(s for s in at.slider if s.key.startswith("pe_n_"))
    slider.set_value(20)
    at.run(timeout=60)
    assert array(figure(at, "Sinusoidal encoding: 20 positions")["data"][0]["z"]).shape[0] == 20

    at = open_app("viz_explorer/pages/look/positional_encoding.py", ckpt="tiny-lm", text="Hi.")
    lm = load_checkpoint(env / "tiny-lm")
    learned = array(figure(at, "Learned position embeddings")["data"][0]["z"])
    assert np.allclose(learned, lm.model.embed.pos.weight[: len(learned)].detach(), atol=1e-6)


# -- step-through decoding ---------------------------------------------------------------------------
def test_decoding_next_back_and_what_each_step_shows(env):
    at = open_app("viz_explorer/pages/step/decoding.py")
    hm = load_checkpoint(env / "tiny-zh-en")
    ref = decode(hm, ZH, DecodeSettings(max_new_tokens=20))
    assert "Step 0 of" in at.get("progress")[0].proto.text
    assert figures(at) == []
    for i in (1, 2):
        at.button(key="dc_next").click().run(timeout=60)
        assert f"Step {i} of {len(ref.steps)}" in at.get("progress")[0].proto.text
        assert at.text[0].value == "[begin] ‖ " + " ".join(ref.pieces[1: 1 + i])
    cands = figure(at, "Top candidates at step 2")
    assert np.allclose(array(cands["data"][0]["x"]), [c.prob for c in ref.steps[1].candidates], atol=1e-5)
    cross = figure(at, "Cross-attention of the newest query")
    assert np.allclose(array(cross["data"][0]["z"]),
                       ref.steps[1].attention["decoder.0.cross_attn.hook_pattern"], atol=1e-5)
    assert len(figure(at, "Self-attention of the newest query")["data"][0]["x"]) == 2   # [begin] + 1 token
    by_key(at.selectbox, "dc_layer").set_value(1)
    at.run(timeout=60)
    cross = figure(at, f"Cross-attention of the newest query, {ref.pieces[1]} → {ref.pieces[2]}, layer 1")
    assert np.allclose(array(cross["data"][0]["z"]),
                       ref.steps[1].attention["decoder.1.cross_attn.hook_pattern"], atol=1e-5)
    at.button(key="dc_back").click().run(timeout=60)
    assert "Step 1 of" in at.get("progress")[0].proto.text


def test_decoding_strategies(env):
    at = open_app("viz_explorer/pages/step/decoding.py")
    by_key(at.button_group, "dc_strategy").set_value("sample").run(timeout=60)
    assert {s.key for s in at.slider} >= {"dc_temp", "dc_top_p"}
    at.button(key="dc_next").click().run(timeout=60)
    assert figure(at, "Top candidates at step 1")

    by_key(at.button_group, "dc_strategy").set_value("beam").run(timeout=60)
    assert "Step 0 of" in at.get("progress")[0].proto.text            # a new trace starts again
    at.button(key="dc_next").click().run(timeout=60)
    at.button(key="dc_next").click().run(timeout=60)
    tree = figure(at, "Beam search up to step 2")
    ref = decode(load_checkpoint(env / "tiny-zh-en"), ZH, DecodeSettings("beam", beam_width=4, max_new_tokens=20))
    n_beams = sum(len(s.beams) for s in ref.steps[:2])
    assert len(tree["data"][-1]["x"]) == n_beams          # the node trace comes last


def test_decoding_continues_the_text_for_a_language_model(env):
    at = open_app("viz_explorer/pages/step/decoding.py", ckpt="tiny-lm", text="The cat sat")
    hm = load_checkpoint(env / "tiny-lm")
    prompt = ["[begin]"] + hm.tokenizer.pieces(hm.tokenizer.encode("The cat sat"))
    assert at.text[0].value.strip() == " ".join(prompt) + " ‖"
    at.button(key="dc_next").click().run(timeout=60)
    assert at.text[0].value.startswith(" ".join(prompt) + " ‖ ") and len(at.text[0].value) > len(" ".join(prompt)) + 3
    assert not any("Cross-attention" in f["layout"]["title"]["text"] for f in figures(at))
    assert len(figure(at, "Self-attention of the newest query")["data"][0]["x"]) == len(prompt)


def test_decoding_a_long_prompt_says_how_much_was_cut(env):
    hm = load_checkpoint(env / "tiny-lm")
    text = "The cat sat on the mat and looked at the bird. " * 6
    n = len(hm.tokenizer.encode(text))
    at = open_app("viz_explorer/pages/step/decoding.py", ckpt="tiny-lm", text=text)
    room = hm.cfg.max_len - 1 - 20                       # the page's default: 20 new tokens
    assert f"its first {n - room} pieces are not used here" in texts(at)
    # an LM keeps the end of its prompt: the decoder sequence ends with the text's last pieces
    kept = hm.tokenizer.pieces(hm.tokenizer.encode(text)[-room:])
    assert " ".join(["[begin]"] + kept) + " ‖" in texts(at)


# -- bad input ------------------------------------------------------------------------------------
def test_empty_text_asks_for_text_on_every_page(env):
    at = open_app(text="   ")
    for page in PAGES:
        at.switch_page(page)
        at.run(timeout=60)
        assert not at.exception
        if page != "viz_explorer/pages/look/positional_encoding.py":      # positional encodings need no text
            assert "Type a sentence" in texts(at), page
            assert figures(at) == []


def test_markup_and_emoji_are_shown_as_text(env):
    # the tiny tokenizer has no "<": it falls back to the byte piece <0x3C>, shown as the character "<", which
    # plotly would swallow as the start of an unknown tag unless labels are escaped
    text = "<script>alert(1)</script> 😀 龘"
    at = open_app(text=text)
    raw = at.session_state["_viz_ctx"].hm.tokenizer
    assert "<0x3C>" in [raw.sp.id_to_piece(i) for i in raw.encode(text)]         # the case under test
    pieces = list(tables(at)[1].iloc[:, 1])
    assert "<" in pieces and "😀(1/4)" in pieces and "<0x3C>" not in pieces       # plain text in the table
    for page in PAGES[1:]:
        at.switch_page(page)
        at.run(timeout=60)
        assert not at.exception, page
        for f in figures(at):
            dumped = json.dumps(f, ensure_ascii=False)
            assert "<0x" not in dumped and "<script" not in dumped, (page, f["layout"]["title"]["text"])
        if page == "viz_explorer/pages/look/attention.py":
            assert "1:&lt;" in figure(at, "layer 0, head 0")["data"][0]["x"]
    at.switch_page("viz_explorer/pages/step/decoding.py")
    at.run(timeout=60)
    for _ in range(3):
        at.button(key="dc_next").click().run(timeout=60)
    assert not at.exception
    for m in at.markdown:                                            # markdown mentioning pieces is escaped
        assert not re.search(r"(?<!\\)<", m.value), m.value


def test_long_text_is_cut_with_a_notice(env):
    hm = load_checkpoint(env / "tiny-zh-en")
    text = "我是一名工程师。" * 30
    n_cut = len(hm.tokenizer.encode(text)) - (hm.cfg.max_len - 1)
    assert n_cut > 0
    at = open_app("viz_explorer/pages/look/attention.py", text=text)
    gone = left_out(hm.tokenizer, hm.cfg, text, encode_input(hm.tokenizer, hm.cfg, text))
    assert gone and f"({len(gone)} characters) was left out" in texts(at)            # in characters, not pieces
    shown = len(figure(at, "layer 0, head 0")["data"][0]["x"])                    # a window of the max_len pieces
    assert shown + by_key(at.slider, "at_window").max == hm.cfg.max_len


def test_broken_checkpoint_is_listed_and_the_others_keep_working(ckpt_root, tmp_path, monkeypatch):
    root = tmp_path / "checkpoints"
    shutil.copytree(ckpt_root / "tiny-zh-en", root / "good")
    shutil.copytree(ckpt_root / "tiny-zh-en", root / "truncated")
    weights = root / "truncated" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    shutil.copytree(ckpt_root / "tiny-lm", root / "noconfig")
    (root / "noconfig" / "config.json").unlink()
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(root))

    at = open_app(ckpt=None)
    assert by_key(at.sidebar.selectbox, "ckpt").value == "good"
    listed = "\n".join(t.value for t in at.sidebar.text)
    assert "truncated" in listed and "model.safetensors" in listed
    assert "noconfig" in listed and "config.json" in listed
    assert len(tables(at)) == 3

    by_key(at.sidebar.selectbox, "ckpt").set_value("truncated").run(timeout=60)
    assert not at.exception
    assert "This checkpoint cannot be used" in texts(at) and "model.safetensors" in texts(at)
    by_key(at.sidebar.selectbox, "ckpt").set_value("good").run(timeout=60)
    assert not at.exception and len(tables(at)) == 3


# -- the lab: knock out heads, positions on/off, compare two inputs -------------------------------------
LAB_PAGES = {"viz_explorer/pages/experiment/knockout.py": ["before and after", "After knock-out"],
             "viz_explorer/pages/experiment/positions_on_off.py": ["positions on:", "positions off:"],
             "viz_explorer/pages/experiment/compare_inputs.py": ["Text 1:", "Text 2:"]}


def _bars(at):
    f = figure(at, "Probability of each token of the original output")
    return array(f["data"][0]["y"]), array(f["data"][1]["y"]), f["data"][0]["x"]


@pytest.mark.parametrize("ckpt,text", [("tiny-zh-en", ZH), ("tiny-lm", "The cat sat on the mat.")])
def test_lab_pages_open_for_a_translator_and_a_language_model(env, ckpt, text):
    at = open_app(ckpt=ckpt, text=text)
    for page, titles in LAB_PAGES.items():
        at.switch_page(page)
        at.run(timeout=60)
        assert not at.exception, (page, [e.value for e in at.exception])
        shown = [f["layout"]["title"]["text"] for f in figures(at)]
        for want in titles:
            assert any(want in s for s in shown), (page, want, shown)
    at = open_app(ckpt=ckpt, text="  ")
    for page in LAB_PAGES:
        at.switch_page(page)
        at.run(timeout=60)
        assert not at.exception and "Type a sentence" in texts(at) and figures(at) == []


def test_knockout_toggle_changes_the_after_probabilities(env):
    from viz_transformer.run.logit_rules import never_generated
    at = open_app("viz_explorer/pages/experiment/knockout.py")
    before, after, x = _bars(at)
    assert np.allclose(before, after)                      # nothing knocked out yet
    hm = load_checkpoint(env / "tiny-zh-en")
    run = hm.run(ZH)
    assert x == [f"{i}:{p}" for i, p in enumerate(hm.tokenizer.pieces(run.trace.output_ids))]

    by_key(at.button_group, "ko_pick_decoder.cross_attn").set_value(["L0·H1"]).run(timeout=60)
    assert not at.exception
    before2, after2, _ = _bars(at)
    assert np.allclose(before2, before) and not np.allclose(after2, before, atol=1e-4)

    def zero_head_1(z, hook):                              # [batch, q, head, d_head]
        z = z.clone()
        z[:, :, 1] = 0
        return z
    import torch
    logits = hm.model.run_with_hooks(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]),
                                     fwd_hooks=[("decoder.0.cross_attn.hook_z", zero_head_1)])[0]
    logits[:, never_generated(hm.tokenizer)] = float("-inf")
    p = torch.softmax(logits, -1)
    ref = [p[t, i].item() for t, i in enumerate(run.trace.output_ids)]
    assert np.allclose(after2, ref, atol=1e-5)
    assert "1 of" in texts(at) and "heads knocked out" in texts(at)
    assert at.text[1].value == (hm.run(ZH, fwd_hooks=[("decoder.0.cross_attn.hook_z", zero_head_1)]).output
                                or "(nothing: it ended at once)")

    at.button(key="ko_all_encoder.self_attn_1").click().run(timeout=60)
    assert by_key(at.button_group, "ko_pick_encoder.self_attn").value == [f"L1·H{h}" for h in range(hm.cfg.n_heads)]
    at.button(key="ko_clear").click().run(timeout=60)
    assert np.allclose(_bars(at)[1], before)


def test_knockout_ranking_has_one_row_per_head(env):
    at = open_app("viz_explorer/pages/experiment/knockout.py")
    hm = load_checkpoint(env / "tiny-zh-en")
    cfg = hm.cfg
    n = (cfg.n_encoder_layers + 2 * cfg.n_decoder_layers) * cfg.n_heads
    at.button(key="ko_rank").click().run(timeout=60)
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) == n and list(table.columns[:3]) == ["block", "layer", "head"]
    grid = figure(at, "cross-attention (decoder → encoder): Δ log-probability per head")
    z = array(grid["data"][0]["z"]).reshape(cfg.n_decoder_layers, cfg.n_heads)
    cross = table[table["block"] == "cross-attention (decoder → encoder)"]      # the block's label, not its name
    assert np.allclose(z[cross["layer"], cross["head"]], cross["Δ log-probability"], atol=1e-5)


def test_positions_page_shows_the_bag_of_pieces(env):
    at = open_app("viz_explorer/pages/experiment/positions_on_off.py")
    table = tables(at)[0]
    gaps = dict(zip(table["positions"], table["gap"].astype(float)))
    assert gaps["positions off"] < 1e-4 < gaps["positions on"]
    hm = load_checkpoint(env / "tiny-zh-en")
    pieces = hm.tokenizer.pieces(hm.tokenizer.encode(ZH))
    words = [i for i, p in enumerate(pieces) if any(c.isalnum() for c in p.replace("\u2581", ""))]
    rev, swap = list(pieces), list(pieces)                   # punctuation (and a lone ▁) stays in place
    for i, j in zip(words, words[::-1]):
        rev[i] = pieces[j]
    swap[words[0]], swap[words[-1]] = pieces[words[-1]], pieces[words[0]]
    assert " ".join(rev + ["[end]"]) in texts(at) and pieces[-1] == "。" == rev[-1]
    by_key(at.button_group, "po_how").set_value("swap").run(timeout=60)
    assert " ".join(swap + ["[end]"]) in texts(at)


def test_compare_page_difference_and_why_none(env):
    at = open_app("viz_explorer/pages/experiment/compare_inputs.py")
    assert figure(at, "Text 2: encoder self-attention, layer 0, head 0")
    hm = load_checkpoint(env / "tiny-zh-en")
    other = "我是一名工程师！"                  # as many pieces as ZH (the last one differs)
    assert len(hm.tokenizer.encode(other)) == len(hm.tokenizer.encode(ZH))
    at.text_input[0].set_value(other).run(timeout=60)
    a = hm.run(ZH).cache["encoder.0.self_attn.hook_pattern"][0, 0]
    b = hm.run(other).cache["encoder.0.self_attn.hook_pattern"][0, 0]
    assert np.allclose(array(figure(at, "Text 1 − text 2")["data"][0]["z"]), (a - b).numpy(), atol=1e-5)
    at.text_input[0].set_value("我们明天早上八点在学校门口见面。").run(timeout=60)
    assert not at.exception and "No difference view" in texts(at)
    assert not any("Text 1 − text 2" in f["layout"]["title"]["text"] for f in figures(at))


def test_lab_pages_show_markup_as_text(env):
    at = open_app(text="<b>我</b> 😀")
    at.session_state["cp_text_translator"] = "<i>x</i>"
    for page in LAB_PAGES:
        at.switch_page(page)
        at.run(timeout=60)
        assert not at.exception, (page, [e.value for e in at.exception])
        for f in figures(at):
            dumped = json.dumps(f, ensure_ascii=False)
            assert "<0x" not in dumped and "<b>" not in dumped, (page, f["layout"]["title"]["text"])
        for m in at.markdown:
            assert not re.search(r"(?<!\\)<", m.value), (page, m.value)
