"""Search a long text's window (widgets.window with pieces; piece_labels.find_piece): a typed word moves the
heatmap's window to where the text first has it, in English and Chinese; a word not there says so in one line."""
from __future__ import annotations

from app_util import by_key, figure, open_app, open_tab, texts
from viz_transformer import load_checkpoint
from viz_transformer.analysis.piece_labels import find_piece
from viz_transformer.plots import figure_rules

TEXT = "我是一名工程师。" * 5 + "他是我的朋友。" + "我是一名工程师。" * 4


def test_find_piece_spans_pieces_and_reads_space_markers_as_spaces():
    pieces = ["▁Once", "▁up", "on", "▁a", "▁time", "Ġthe", "Ġdog"]
    assert find_piece(pieces, "upon a") == 1
    assert find_piece(pieces, "TIME") == 4
    assert find_piece(pieces, "the dog") == 5
    assert find_piece(pieces, "atime") == 3               # typed without the space the pieces show
    assert find_piece(pieces, "cat") is None and find_piece(pieces, "  ") is None


def test_a_found_piece_moves_the_window_to_it(env):
    run = load_checkpoint(env / "tiny-zh-en").run(TEXT)
    S, W = len(run.src_pieces), figure_rules.max_cells()
    at_ = find_piece(run.src_pieces, "朋友")
    assert S > W and at_ is not None and at_ > W // 2
    at = open_app("viz_explorer/pages/step/step_by_step.py", text=TEXT)
    by_key(at.selectbox, "st_block").set_value("decoder.cross_attn").run(timeout=60)
    by_key(at.text_input, "st_start_find").input("朋友").run(timeout=60)
    start = by_key(at.slider, "st_start").value
    assert start == max(0, min(at_ - W // 2, S - W))
    open_tab(at, "st", "scores")
    assert f"{at_}:{run.src_pieces[at_]}" in figure(at, "softmax over each row")["data"][0]["x"]
    by_key(at.text_input, "st_start_find").input("engineer").run(timeout=60)
    assert "“engineer” is not in this text's pieces." in texts(at)
    assert by_key(at.slider, "st_start").value == start
    zh = open_app("viz_explorer/pages/step/step_by_step.py", text=TEXT, lang="zh")
    by_key(zh.selectbox, "st_block").set_value("decoder.cross_attn").run(timeout=60)
    by_key(zh.text_input, "st_start_find").input("猫").run(timeout=60)
    assert "这段文本的片段里没有“猫”。" in texts(zh)
