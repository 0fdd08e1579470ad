"""viz_transformer.plots.heatmaps: the figures carry the right numbers, labels, scales, titles and escaping."""
from __future__ import annotations

import importlib
import json
import sys

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import pytest
import torch

from viz_transformer.analysis import decoding_steps, patterns, positions
from viz_transformer.plots import charts, heatmaps
from viz_transformer.plots import decoding_figures
from viz_transformer.run.trace import Beam, Step, Trace

PIECES = ["[begin]", "▁the", "▁cat", "▁the", "<script>alert(1)</script>", "a&b"]


def _all_text(fig: go.Figure) -> str:
    return fig.to_json()


def _assert_dressed(fig: go.Figure, title: str):
    """Title, axis labels and (for colour-encoded traces) an explicit scale with a colour bar."""
    assert fig.layout.title.text == title
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    scaled = [tr for tr in fig.data if getattr(tr, "colorscale", None) is not None
              or (getattr(tr, "marker", None) is not None and getattr(tr.marker, "colorscale", None) is not None)]
    assert scaled, "no trace with an explicit colour scale"
    bars = [tr.colorbar if getattr(tr, "colorbar", None) is not None else tr.marker.colorbar for tr in scaled]
    assert any(b.title.text for b in bars)


def test_escape_and_labels():
    assert heatmaps.escape("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert heatmaps.escape("a&b") == "a&amp;b"
    labels = heatmaps.labels(PIECES)
    assert labels[1] != labels[3]                      # repeated "▁the" stays distinct
    assert labels[4] == "4:&lt;script&gt;alert(1)&lt;/script&gt;" and labels[5] == "5:a&amp;b"
    assert heatmaps.labels(["x", "y"], start=10) == ["10:x", "11:y"]


def test_attention_heatmap_values_labels_scale_title():
    p = torch.softmax(torch.randn(6, 6), -1)
    fig = heatmaps.attention_heatmap(p, PIECES, PIECES, "layer 0, head 1", "key", "query")
    hm = fig.data[0]
    assert isinstance(hm, go.Heatmap)
    assert np.allclose(np.asarray(hm.z), p.numpy(), atol=1e-6)
    assert list(hm.x) == heatmaps.labels(PIECES) and list(hm.y) == heatmaps.labels(PIECES)
    assert hm.zmin == 0 and hm.zmax == 1
    lum = [sum(plotly.colors.unlabel_rgb(plotly.colors.convert_colors_to_same_type(c)[0][0]))
           for _, c in hm.colorscale]
    assert lum[0] > 700 and lum[0] > lum[-1]              # 0 is (near) white, 1 the darkest: no weight, no ink
    assert list(fig.layout.yaxis.range) == [5.5, -0.5] and list(fig.layout.xaxis.range) == [-0.5, 5.5]  # query 0 on top
    assert "%{y}" in hm.hovertemplate and "%{x}" in hm.hovertemplate and "%{z" in hm.hovertemplate
    _assert_dressed(fig, "layer 0, head 1")
    assert "<script>" not in _all_text(fig)


def test_attention_scale_is_fixed_for_short_and_follows_the_max_for_long_sequences():
    long = torch.softmax(torch.randn(100, 100), -1)
    fig = heatmaps.attention_heatmap(long, [str(i) for i in range(100)], [str(i) for i in range(100)], "t")
    assert fig.data[0].zmax == pytest.approx(float(long.max()))
    assert heatmaps.attention_heatmap(long[:5, :5], list("abcde"), list("abcde"), "t").data[0].zmax == 1
    assert heatmaps.attention_heatmap(long, [str(i) for i in range(100)], [str(i) for i in range(100)], "t",
                                   zmax=1.0).data[0].zmax == 1


def test_heatmap_numbers_only_when_small():
    small = heatmaps.attention_heatmap(torch.rand(5, 5), list("abcde"), list("abcde"), "t")
    big = heatmaps.attention_heatmap(torch.rand(40, 40), [str(i) for i in range(40)], [str(i) for i in range(40)], "t")
    assert small.data[0].texttemplate and not big.data[0].texttemplate


def test_values_heatmap_is_symmetric_and_shows_minus_infinity_as_gap():
    s = torch.tensor([[1.0, -3.0], [float("-inf"), 2.0]])
    fig = heatmaps.values_heatmap(s, ["q0", "q1"], ["k0", "k1"], "scores", "key", "query")
    hm = fig.data[0]
    assert hm.zmin == -3 and hm.zmax == 3
    z = np.asarray(hm.z, dtype=float)
    assert np.isnan(z[1, 0]) and z[0, 1] == -3
    _assert_dressed(fig, "scores")


def test_mask_heatmap():
    m = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    fig = heatmaps.mask_heatmap(m, PIECES[:4], PIECES[:4], "causal", allowed="ok", blocked="no")
    assert np.array_equal(np.asarray(fig.data[0].z), m.numpy().astype(np.float32))
    assert json.loads(fig.to_json())["data"][0]["z"]["dtype"] == "u1"          # one byte a cell on the wire
    assert list(fig.data[0].colorbar.ticktext) == ["no", "ok"]
    _assert_dressed(fig, "causal")


def test_model_view_places_tiles_and_click_targets():
    pats = torch.rand(2, 3, 5, 5)
    tiles = patterns.model_view_tiles(pats, 32)
    fig = heatmaps.model_view(tiles, "all heads", selected=(1, 2))
    canvas = np.asarray(fig.data[0].z)
    gap = 1
    # tile (layer 1, head 2) starts at row 1 * (5 + gap), column 2 * (5 + gap)
    assert np.allclose(canvas[6:11, 12:17], pats[1, 2].numpy(), atol=1e-6)
    assert np.isnan(canvas[5]).all()                  # the gap row between layers
    pts = fig.data[1]
    assert [list(c) for c in pts.customdata] == [[l, h] for l in range(2) for h in range(3)]
    assert (pts.x[5], pts.y[5]) == (12 + 2, 6 + 2)     # centre of tile (1, 2)
    shape = fig.layout.shapes[0]
    assert (shape.x0, shape.y0) == (11.5, 5.5)
    _assert_dressed(fig, "all heads")


def test_model_view_stays_small_at_512_tokens():
    pats = torch.softmax(torch.randn(3, 8, 512, 512), -1)
    fig = heatmaps.model_view(patterns.model_view_tiles(pats, 32), "big")
    assert np.asarray(fig.data[0].z).shape == (3 * 36 - 4, 8 * 36 - 4)      # 32-cell tiles, 4-cell gaps
    assert len(fig.to_json()) < 300_000
    single = heatmaps.attention_heatmap(pats[0, 0], [str(i) for i in range(512)], [str(i) for i in range(512)], "h")
    assert len(single.to_json()) < 3_000_000          # typed arrays, not 262k JSON floats with 17 digits


def test_line_view_caps_lines_and_thresholds():
    p = torch.softmax(torch.randn(2, 30, 30) * 3, -1)
    fig = heatmaps.line_view(p, [f"t{i}" for i in range(30)], [f"t{i}" for i in range(30)], ["head 0", "head 1"],
                          "lines", max_lines=50, min_weight=0.05)
    lines = [tr for tr in fig.data if tr.mode == "lines"]
    # each link is (x0, x1, None): count links per subplot and compare with a direct count
    for head, axis in enumerate(["x", "x2"]):
        n = sum(len(tr.x) // 3 for tr in lines if tr.xaxis == axis)
        assert n == min(50, int((p[head] >= 0.05).sum()))
    assert len(fig.data) <= 2 * (5 + 2) + 1            # binned traces, not one per line
    assert fig.layout.title.text == "lines"
    assert any(getattr(tr.marker, "showscale", False) for tr in fig.data if tr.mode == "markers")  # colour bar


def test_line_view_labels_are_escaped_and_numbered_from_window_start():
    fig = heatmaps.line_view(torch.rand(1, 2, 2), ["<b>x</b>", "y"], ["<b>x</b>", "y"], ["h"], "t", q_start=40, k_start=40)
    texts = [list(tr.text) for tr in fig.data if tr.mode == "text"]
    assert texts[0] == ["40:&lt;b&gt;x&lt;/b&gt;", "41:y"]


def test_line_view_keeps_every_query_of_a_short_axis_beside_a_long_one():
    # cross-attention: 20 queries, 60 keys; the key window scrolls, every query stays with its links
    from viz_transformer.analysis import patterns
    pat = torch.softmax(torch.randn(20, 60, generator=torch.Generator().manual_seed(0)) * 3, -1)
    (qa, qb), (ka, kb) = patterns.axis_windows(20, 60, start=12, size=48)
    assert (qa, qb) == (0, 20) and (ka, kb) == (12, 60)
    fig = heatmaps.line_view([pat[qa:qb, ka:kb]], [f"q{i}" for i in range(qa, qb)], [f"k{j}" for j in range(ka, kb)],
                          ["h"], "t", min_weight=0.0, max_lines=10_000, q_start=qa, k_start=ka)
    texts = [list(tr.text) for tr in fig.data if tr.mode == "text"]
    assert texts[0] == [f"{i}:q{i}" for i in range(20)] and texts[1] == [f"{j}:k{j}" for j in range(12, 60)]
    n_lines = sum(sum(1 for y in tr.y if y is None) for tr in fig.data if tr.mode == "lines")
    assert n_lines == int((pat[:, 12:] > 1e-12).sum())        # every link of every query into the window


def test_probability_bars_outline_the_chosen_token():
    fig = decoding_figures.probability_bars(["▁I", "▁You", "<x>"], [0.6, 0.3, 0.1], "candidates", chosen=1)
    bar = fig.data[0]
    assert np.allclose(np.asarray(bar.x), [0.6, 0.3, 0.1])
    assert list(bar.marker.line.width) == [0, 3, 0]
    assert list(bar.y)[2] == "2:&lt;x&gt;"
    _assert_dressed(fig, "candidates")


def test_head_rows_one_row_per_head():
    rows = torch.softmax(torch.randn(4, 3), -1)
    fig = heatmaps.head_rows(rows, ["a", "b", "c"], "cross")
    assert list(fig.data[0].y) == ["head 0", "head 1", "head 2", "head 3"]
    assert np.allclose(np.asarray(fig.data[0].z), rows.numpy(), atol=1e-6)
    _assert_dressed(fig, "cross")


def test_positional_and_similarity_heatmaps():
    from viz_transformer.core.positional import sinusoidal_table
    pe = sinusoidal_table(20, 8)
    fig = heatmaps.positional_heatmap(pe, "sinusoidal")
    assert np.allclose(np.asarray(fig.data[0].z), pe.numpy()) and fig.data[0].zmid is None
    assert fig.data[0].zmin == -fig.data[0].zmax
    _assert_dressed(fig, "sinusoidal")
    sim = heatmaps.similarity_heatmap(positions.pe_similarity(pe), "similarity")
    _assert_dressed(sim, "similarity")


def test_curves_and_grouped_bars():
    fig = charts.curves([1, 2, 4], {"raw": [1, 2, 4], "scaled": [1, 1, 1]}, "variance", "d_k", "var", log_x=True)
    assert [tr.name for tr in fig.data] == ["raw", "scaled"] and fig.layout.xaxis.type == "log"
    assert fig.data[0].line.dash != fig.data[1].line.dash   # coinciding lines stay distinguishable
    bars = charts.grouped_bars(["a", "b"], {"s1": [0.2, 0.8], "s2": [0.5, 0.5]}, "row", "key", "weight")
    assert len(bars.data) == 2 and bars.layout.barmode == "group"


def test_beam_tree_nodes_edges_and_states():
    steps = [[Beam([1], ["▁I"], -0.1, 0), Beam([2], ["▁He"], -0.5, 0)],
             [Beam([1, 3], ["▁I", "▁am"], -0.3, 0), Beam([1, 4], ["▁I", "[end]"], -0.9, 0, True)]]
    tr = Trace("beam", None, ["[begin]"], [Step(i, 0, "x", 1.0, [], {}, b) for i, b in enumerate(steps)])
    fig = decoding_figures.beam_tree(decoding_steps.beam_links(tr), "beams")
    tr_best = Trace("beam", None, ["[begin]"], [Step(0, 1, "▁I", 1.0, [], {}, steps[0]),
                                                Step(1, 3, "▁am", 1.0, [], {}, steps[1])])
    best = decoding_figures.beam_tree(decoding_steps.beam_links(tr_best), "beams").data[1]
    assert list(best.x) == [1, 2, None] and list(best.y) == [0, 0, None]
    plain, chosen, nodes = fig.data
    # the trace's output ([0] per Step) matches no beam, so no edge is on the chosen path
    assert list(plain.x) == [1, 2, None, 1, 2, None] and list(plain.y) == [0, 0, None, 0, 1, None]
    assert list(chosen.x) == []
    assert list(nodes.marker.symbol) == ["circle", "circle-open", "circle", "diamond"]
    assert list(nodes.text) == ["▁I", "▁He", "▁am", "[end]"]
    assert np.allclose(np.asarray(nodes.marker.color), [-0.1, -0.5, -0.3, -0.9])
    _assert_dressed(fig, "beams")


def test_figures_are_plain_plotly_json_and_need_no_streamlit(monkeypatch):
    fig = heatmaps.attention_heatmap(torch.rand(3, 3), ["a", "b", "c"], ["a", "b", "c"], "t")
    assert json.loads(fig.to_json())["layout"]["title"]["text"] == "t"
    monkeypatch.setitem(sys.modules, "streamlit", None)          # importing streamlit now fails
    monkeypatch.delitem(sys.modules, "viz_transformer.plots.heatmaps")
    fresh = importlib.import_module("viz_transformer.plots.heatmaps")
    assert fresh.attention_heatmap(torch.rand(2, 2), ["a", "b"], ["a", "b"], "t").data[0].zmax == 1


def test_figures_carry_the_plotly_white_template_exactly():
    """style.white skips re-validating the template: the result must still be plotly_white itself (a heatmap, and
    the architecture diagram, which sets it the same way)."""
    import plotly.io as pio
    from viz_transformer.core.config import ModelConfig
    from viz_transformer.plots import diagram
    z = np.random.default_rng(0).random((5, 5)).astype(np.float32)
    fig = heatmaps.attention_heatmap(z, list("abcde"), list("abcde"), "t")
    assert fig.layout.template.to_plotly_json() == pio.templates["plotly_white"].to_plotly_json()
    cfg = ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32)
    drawn = diagram.architecture_diagram(cfg, 5, 4, {}, "t")
    assert drawn.layout.template.to_plotly_json() == pio.templates["plotly_white"].to_plotly_json()


@pytest.mark.parametrize("label", ["▁I", "▁engineer → .", "▁an → ▁engineer", "工程师 → ▁engineer and more"])
def test_heatmaps_side_by_side_only_while_their_plots_keep_their_width(label):
    """side_by_side, given the rows' labels and the colour bar's title, picks a share only where the heatmap built
    for it (its margins from fit_margins, its colour bar as colorbar_px measures it) keeps a plot of MIN_PLOT px;
    else the full width (step by step at 1366 px: 7 rows labelled "4:▁an → ▁engineer" and "attention weight" had
    a 109 px plot, where side_by_side assumed 150 px of labels and a 95 px bar)."""
    from viz_transformer.plots import figure_rules
    pieces = [f"{label}{i}" for i in range(7)]
    bar = "attention weight"
    width = figure_rules.side_by_side(2, 7, 7, labels=heatmaps.labels(pieces, 0), colorbars=(bar,))
    fig = heatmaps.attention_heatmap(torch.rand(7, 7), pieces, pieces, "softmax over each row = attention weights",
                                     "key (attended to)", "query → prediction", bar, 0, 0, width=width)
    plot = width - fig.layout.margin.l - fig.layout.margin.r - figure_rules.colorbar_px(bar, ["0", "1"])
    assert plot >= figure_rules.MIN_PLOT or width == figure_rules.figure_px(), (width, fig.layout.margin.l)
    assert (width < figure_rules.figure_px()) == (label == "▁I")            # short labels: side by side still
