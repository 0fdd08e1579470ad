"""Why this attention: what the page says about a cell, a logit and a head, against independent recomputes (the
terms summed by hand over score_terms' parts, torch.topk, the model's own logits and scores, a full run's split), on
zh-en (both languages) and the other shipped families."""
from __future__ import annotations

import pytest
import torch

from app_util import ROOT, figures, md_unescape, open_app, open_tab, page_file, texts
from viz_transformer import load_checkpoint
from viz_transformer.analysis import why_attention as why
from viz_transformer.analysis.score_terms import (full_run, head_circuits, logit_terms, part_group, score_terms,
                                                  stream_parts, term_run)

PAGE = page_file("why")


def t_zh(key: str) -> str:
    from viz_explorer.kit.strings_zh import ZH as STRINGS
    return STRINGS[key]
ZH = "我是一名工程师。"


@pytest.fixture(scope="module")
def zh_en():
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en")
    return hm, full_run(hm, ZH)


def test_grouped_terms_are_the_parts_summed_by_hand(zh_en):
    hm, run = zh_en
    t = score_terms(hm, run, "decoder.cross_attn", 2, 3, 2, 4)
    for by_layer in (False, True):
        g = why.group_terms(t, by_layer)
        for i, qg in enumerate(g.query_groups):
            for j, kg in enumerate(g.key_groups):
                by_hand = sum(float(t.matrix[a, b]) for a, qp in enumerate(t.query_parts) for b, kp in enumerate(t.key_parts)
                              if part_group(qp, by_layer) == qg and part_group(kp, by_layer) == kg)
                assert float(g.matrix[i, j]) == pytest.approx(by_hand, abs=1e-12)
        assert g.total() == pytest.approx(t.score, rel=1e-4)
    g = why.group_terms(t)
    assert g.query_groups == ["word", "position", "context", "bias"] == g.key_groups
    s = why.story(t)
    flat = [(abs(float(g.matrix[i, j])), qg, kg) for i, qg in enumerate(g.query_groups) for j, kg in enumerate(g.key_groups)]
    assert (s.query_group, s.key_group) == max(flat)[1:]
    position = sum(float(t.matrix[a, b]) for a, qp in enumerate(t.query_parts) for b, kp in enumerate(t.key_parts)
                   if "position" in (part_group(qp), part_group(kp)))
    assert s.position == pytest.approx(position, abs=1e-12)


def test_the_runner_up_and_the_gap(zh_en):
    hm, run = zh_en
    pat = run.cache["decoder.1.cross_attn.hook_pattern"][0, 5]
    for q in range(pat.shape[0]):
        first, second = torch.topk(pat[q], 2).indices.tolist()
        assert why.runner_up(pat[q], first) == second
        assert why.runner_up(pat[q], second) == first
    causal = run.cache["decoder.0.self_attn.hook_pattern"][0, 0]
    assert why.runner_up(causal[0], 0) == -1                  # row 0 of a causal mask sees one key
    a, b = (score_terms(hm, run, "decoder.cross_attn", 1, 5, 3, k) for k in (0, 4))
    gap = why.key_group_gap(a, b)
    assert sum(gap.values()) == pytest.approx(a.score - b.score, rel=1e-4)
    assert gap["word"] == pytest.approx(a.key_groups()["word"] - b.key_groups()["word"])


def test_the_logit_grid_holds_each_head_s_part(zh_en):
    hm, run = zh_en
    lt = logit_terms(hm, run, 3)
    grid = why.head_grid(lt, hm.cfg.n_heads)
    parts = lt.by_part()
    assert grid.rows == [(l, k) for l in range(hm.cfg.n_decoder_layers) for k in ("self", "cross")]
    for r, (layer, kind) in enumerate(grid.rows):
        for h in range(hm.cfg.n_heads):
            assert float(grid.values[r, h]) == parts[f"dec.L{layer}.{'H' if kind == 'self' else 'X'}{h}"]
    assert float(grid.values.sum()) + sum(grid.others.values()) == pytest.approx(float(run.logits[lt.row, lt.token]),
                                                                                 rel=1e-4)
    assert why.rivals(run.logits[lt.row], lt.token, 3) == [i for i in torch.topk(run.logits[lt.row], 4).indices.tolist()
                                                          if i != lt.token][:3]


@pytest.mark.parametrize("name, text", [("zh-en", ZH), ("zh-en-decoder", "我喜欢你。"), ("en-stories", "Once upon a time")])
def test_the_page_s_run_and_rows_split_as_a_full_run_does(name, text):
    """term_run keeps only what the split reads, and a cell reads only its query's and key's rows: the terms are a
    full run's."""
    hm = load_checkpoint(ROOT / "checkpoints" / name)
    full = full_run(hm, text)
    lean = term_run(hm, text, full.output_ids)                  # the page's: the output teacher-forced, not generated
    assert lean.output_ids == full.output_ids and lean.tgt_ids == full.tgt_ids
    block = "decoder.cross_attn" if hm.cfg.is_encoder_decoder else "decoder.self_attn"
    for q, k in ((2, 1), (3, 3)):
        a, b = score_terms(hm, full, block, 1, 1, q, k), score_terms(hm, lean, block, 1, 1, q, k)
        assert a.query_parts == b.query_parts and a.key_parts == b.key_parts
        torch.testing.assert_close(a.matrix, b.matrix, rtol=1e-4, atol=1e-5)
        assert b.total() == pytest.approx(b.score, rel=1e-4, abs=1e-4)
    every = stream_parts(hm, full, "decoder", 1, "self_attn")
    two = stream_parts(hm, full, "decoder", 1, "self_attn", [3, 1])
    for part in every:
        torch.testing.assert_close(two[part], every[part][[3, 1]], rtol=1e-5, atol=1e-6)   # float32 products
    assert logit_terms(hm, lean, 1).total() == pytest.approx(logit_terms(hm, full, 1).logit, rel=1e-4)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_splits_the_cell_a_student_picks(lang, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = open_app(PAGE, ckpt="zh-en", text=ZH, lang=lang, timeout=120)
    hm, run = load_checkpoint(ROOT / "checkpoints" / "zh-en"), None
    run = full_run(hm, ZH)
    at.session_state["wy_layer"], at.session_state["wy_head"] = 1, 5      # as a tap on (2, 6) sets them
    at.session_state["wy_q"], at.session_state["wy_k"] = 2, 6
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    t = score_terms(hm, run, "decoder.cross_attn", 1, 5, 2, 6)
    shown = texts(at)
    assert f"{t.total():.4f}" in shown and f"{t.score:.4f}" in shown
    g = why.group_terms(t)
    heat = next(f for f in figures(at) if f["data"][0].get("type") == "heatmap" and "Σ" in str(f["data"][0]["x"]))
    import numpy as np
    from app_util import array
    z = array(heat["data"][0]["z"])
    np.testing.assert_allclose(z[:-1, :-1], g.matrix.numpy(), rtol=1e-5, atol=1e-6)     # float32 in the figure
    assert z[-1, -1] == pytest.approx(float(g.matrix.sum()), rel=1e-5)
    s = why.story(t)
    assert f"{s.value:+.2f}" in md_unescape(shown) and f"{s.position:+.2f}" in md_unescape(shown)
    pat = run.cache["decoder.1.cross_attn.hook_pattern"][0, 5, 2]
    other = why.runner_up(pat, 6)
    u = score_terms(hm, run, "decoder.cross_attn", 1, 5, 2, other)
    win, lose = (t, u) if pat[6] >= pat[other] else (u, t)
    assert f"{win.score - lose.score:.2f}" in shown

    open_tab(at, "wy", "logit")
    assert not at.exception, [e.value for e in at.exception]
    lt = logit_terms(hm, run, 3)            # the tab opens on the word the picked row writes: row 2 writes step 3
    assert lt.row == 2
    grid = why.head_grid(lt, hm.cfg.n_heads)
    z = next(array(f["data"][0]["z"]) for f in figures(at) if f["data"][0].get("type") == "heatmap"
             and len(array(f["data"][0]["z"])) == len(grid.rows))
    np.testing.assert_allclose(z, grid.values.numpy(), rtol=1e-5, atol=1e-6)
    assert f"{lt.logit:.2f}" in texts(at)

    open_tab(at, "wy", "circuits")
    assert not at.exception, [e.value for e in at.exception]
    c = head_circuits(hm, 1, 5, "decoder.cross_attn")
    values = [m.value for m in at.metric]
    assert any(f"{c.copy_share(1):.0%}" in v for v in values) and any(f"{c.copy_share(10):.0%}" in v for v in values)


def test_a_masked_lm_says_it_writes_no_word(monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = open_app(PAGE, ckpt="zh-en-bert", text="我是一名工[MASK]师。", lang="en", timeout=120)
    open_tab(at, "wy", "logit")
    assert not at.exception and any("writes no output word" in i.value for i in at.info)


@pytest.mark.slow
def test_a_qk_norm_model_says_in_one_line_that_it_cannot_be_split(tmp_path, monkeypatch):
    import hf_util as H
    H.build(H.SHAPE_BY_ID["qwen3-headdim24-gqa2-tied"], tmp_path / "qwen3")
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(tmp_path))
    at = open_app(PAGE, ckpt="qwen3", text="The cat sat on the mat.", lang="zh", timeout=120)
    assert not at.exception and [i.value for i in at.info] == [t_zh("wy.qk_norm")] and not figures(at)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2-5heads-untied-gelu", "llama-gqa2-llama3-bias", "qwen2-3heads-gqa1-bias", "t5"])
def test_every_tab_on_imported_folders(tmp_path, monkeypatch, family):
    """GPT-2, Llama (RoPE, grouped-query), Qwen2 and T5 (its relative bias an extra term) folders: each tab draws, the
    score the page prints is the model's (a full run's hook_scores at the page's first cell) and its terms add up to
    it; RoPE's and T5's positions are said to act inside the score."""
    import hf_t5_util as HT
    import hf_util as H
    from viz_explorer.kit.strings import EN
    if family == "t5":
        HT.build_t5(HT.T5_BY_ID["t5-v1.0-relu-tied"], tmp_path / family)
    else:
        H.build(H.SHAPE_BY_ID[family], tmp_path / family)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(tmp_path))
    text = "the cat sat on the mat"
    at = open_app(PAGE, ckpt=family, text=text, lang="en", timeout=120)
    hm = load_checkpoint(tmp_path / family)
    run = full_run(hm, text)
    block = at.session_state["wy_block"]
    q, k = at.session_state["wy_q"], at.session_state["wy_k"]
    stack, site = block.split(".")
    score = float(run.cache[f"{stack}.0.{site}.hook_scores"][0, 0, q, k])
    t = score_terms(hm, run, block, 0, 0, q, k)
    assert t.total() == pytest.approx(score, rel=1e-4, abs=1e-4)
    shown = md_unescape(texts(at))
    assert EN["wy.check"].format(total=t.total(), score=score) in shown
    if hm.cfg.positional == "rope":
        assert EN["wy.story.rope"] in shown
    if hm.cfg.positional == "relative" and site == "self_attn":
        assert EN["wy.story.relative"].format(extra=sum(t.extra.values())) in shown
    for tab in ("logit", "circuits"):
        open_tab(at, "wy", tab)
        assert figures(at)


def test_a_new_text_opens_on_its_own_first_cell(monkeypatch):
    """A cell picked on one text is not carried to the next: the new text opens on its first row and that row's top
    key (a link or a lesson that gives the cell with the text keeps it: tests/test_links.py)."""
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = open_app(PAGE, ckpt="zh-en", text=ZH, lang="en", timeout=120)
    at.session_state["wy_q"], at.session_state["wy_k"] = 3, 1
    at.run()
    assert (at.session_state["wy_q"], at.session_state["wy_k"]) == (3, 1)
    other = "今天天气很好。"
    at.session_state["text"] = other
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en")
    row = full_run(hm, other).cache["decoder.0.cross_attn.hook_pattern"][0, 0, 0]
    assert (at.session_state["wy_q"], at.session_state["wy_k"]) == (0, int(row.argmax()))


def test_a_picked_cell_outside_the_window_brings_the_window_to_it(monkeypatch):
    """On a long text the heatmap shows a window; a key picked beyond it moves the window so the framed cell shows."""
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    long = "我们今天早上在学校门口见面，然后一起坐火车去北京看朋友。" * 4
    at = open_app(PAGE, ckpt="zh-en", text=long, lang="en", timeout=120)
    n_keys = len(load_checkpoint(ROOT / "checkpoints" / "zh-en").tokenizer.encode(long)) + 1     # + [end]
    at.session_state["wy_k"] = n_keys - 3
    at.run()
    heat = figures(at)[0]
    shown = [int(str(x).split(":")[0]) for x in heat["data"][0]["x"]]
    assert n_keys - 3 in shown and len(shown) < n_keys                     # a window, and the cell in it
    frame = [s for s in heat["layout"].get("shapes", []) if s.get("type") == "rect"]
    assert frame and shown[round(frame[0]["x0"] + 0.5)] == n_keys - 3
