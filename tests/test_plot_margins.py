"""Margins decided on the server (plot_margins): no axis leaves its margin to Plotly's automargin redraws,
the margins hold the labels, and long axes label every k-th token only while hover keeps every one."""
import numpy as np
import pytest

from viz_transformer.plots import charts, heatmaps
from viz_transformer.plots import decoding_figures
from viz_transformer.plots.margins import MIN_LABEL_GAP, every_kth, fit_margins, text_px


def _axes(fig):
    return list(fig.select_xaxes()) + list(fig.select_yaxes())


def test_text_width_counts_full_width_characters_as_one_em():
    assert text_px("工程师") == 3 * 12
    assert text_px("abc") < text_px("工程师")
    assert text_px("&lt;b&gt;") == text_px("[b]")      # escaped labels are measured as shown: 3 characters
    assert text_px("<br>") == 0                          # markup is not text


def test_every_kth_keeps_labels_apart():
    cats = [f"{i}:x" for i in range(512)]
    assert every_kth(cats, 20.0) is None                     # a label per cell fits
    shown = every_kth(cats, 2.0)
    step = int(cats.index(shown[1]))
    assert shown == cats[::step] and step * 2.0 >= MIN_LABEL_GAP and (step - 1) * 2.0 < MIN_LABEL_GAP


def test_every_figure_turns_automargin_off_and_its_margins_hold_the_longest_label():
    long = ["我是一名工程师我是一名工程师", "b", "c"]
    figs = [heatmaps.attention_heatmap(np.full((3, 3), 1 / 3), long, long, "t"),
            decoding_figures.probability_bars(long, [0.5, 0.3, 0.2], "p"),
            charts.curves([1, 2, 3], {"a": [1, 2, 3]}, "c", "x", "y"),
            heatmaps.line_view([np.full((3, 3), 1 / 3)], long, long, ["h0"], "lines")]
    for fig in figs:
        assert all(ax.automargin is False for ax in _axes(fig)), fig.layout.title.text
    bars = figs[1]                                          # token labels on the left
    assert bars.layout.margin.l >= text_px(heatmaps.labels(long)[0])
    heat = figs[0]                                          # turned by 45° at the bottom, straight on the left
    widest = text_px(heatmaps.labels(long)[0])
    assert heat.layout.margin.l >= widest and heat.layout.margin.b <= widest * 0.75 + 60


def test_a_right_hand_axis_added_later_gets_its_margin():
    fig = charts.curves([1, 2], {"a": [1, 2]}, "c", "x", "y")
    fig.update_layout(yaxis2=dict(title=dict(text="BLEU"), overlaying="y", side="right"))
    before = fig.layout.margin.r
    fit_margins(fig)
    assert fig.layout.margin.r > before and fig.layout.yaxis2.automargin is False


def test_a_long_heatmap_shows_a_window_of_readable_cells_and_hovers_all():
    from viz_transformer.plots import figure_rules
    pieces = [f"p{i}" for i in range(512)]
    fig = heatmaps.attention_heatmap(np.full((512, 512), 1 / 512), pieces, pieces, "t")
    m, n = fig.layout.margin, figure_rules.max_cells()
    assert list(fig.layout.yaxis.range) == [n - 0.5, -0.5] and list(fig.layout.xaxis.range) == [-0.5, n - 0.5]
    assert (fig.layout.height - m.t - m.b) / n >= figure_rules.MIN_CELL        # cells never below the minimum
    ticks = list(fig.layout.yaxis.tickvals)
    assert set(ticks) <= set(fig.data[0].y) and len(ticks) < 512               # every k-th labelled
    step = fig.data[0].y.index(ticks[1]) - fig.data[0].y.index(ticks[0])
    assert step * (fig.layout.height - m.t - m.b) / n >= 14                     # labels a text height apart
    assert list(fig.data[0].x) == heatmaps.labels(pieces)       # every cell still carries its token for hover
    small = heatmaps.attention_heatmap(np.full((8, 8), 1 / 8), pieces[:8], pieces[:8], "t")
    assert small.layout.yaxis.tickvals is None               # few tokens: every one labelled
    assert list(small.layout.yaxis.range) == [7.5, -0.5] and small.layout.dragmode != "pan"   # every row: no pan


def test_crowded_x_labels_slant_at_the_angle_their_margin_was_made_for():
    from viz_transformer.plots.margins import TICK_PX, WIDE_PLOT_PX, auto_angle
    short = ["a", "b", "c"]
    long4 = ["decoder-only · decoder self-attention (masked)"] * 4
    many = [f"{i}:piece" for i in range(100)]
    assert auto_angle(short) == 0 and auto_angle(long4) == 30 and auto_angle(many) == 90
    for labels in (long4, many):                 # the angle chosen keeps neighbours a text height apart
        angle = auto_angle(labels)
        assert WIDE_PLOT_PX / len(labels) * np.sin(np.radians(angle)) >= TICK_PX or angle == 90
    fig = charts.curves([1, 2], {"a": [1, 2]}, "c", "x", "y")
    fig.update_xaxes(tickvals=list(range(4)), ticktext=long4)
    fit_margins(fig)
    assert fig.layout.xaxis.tickangle == 30      # written into the axis: Plotly draws what was measured
    widest = text_px(long4[0])
    assert widest * 0.5 <= fig.layout.margin.b < widest * 0.5 + 80
    # the last label runs down to the right from half a category before the edge: the right margin holds it
    assert fig.layout.margin.r >= widest * np.cos(np.radians(30)) - WIDE_PLOT_PX / 8


def test_a_legend_above_the_plot_gets_room_under_the_title():
    from viz_transformer.plots import model_figures
    from viz_transformer.plots.margins import LEGEND_ROW_PX, WIDE_PLOT_PX
    names = ["enc-dec · encoder self-attention", "enc-dec · decoder self-attention (masked)",
             "decoder-only · decoder self-attention (masked)", "prefix LM · decoder self-attention (masked)"]
    one = model_figures.spectra({names[0]: np.random.rand(2, 4) + 0.1}, "t")
    four = model_figures.spectra({n: np.random.rand(2, 4) + 0.1 for n in names}, "t")
    rows = int(np.ceil(sum(text_px(n) for n in names) / WIDE_PLOT_PX))      # at least this many rows
    assert four.layout.margin.t - one.layout.margin.t >= LEGEND_ROW_PX * rows >= LEGEND_ROW_PX


def test_the_rank_strip_keeps_a_plot_under_long_group_names():
    from viz_transformer.plots import model_figures
    names = ["enc-dec · encoder self-attention", "enc-dec · decoder self-attention (masked)",
             "decoder-only · decoder self-attention (masked)", "prefix LM · decoder self-attention (masked)"]
    fig = model_figures.rank_strip({n: [1.0, 2.0] for n in names}, "t", "x", sizes={n: 4 for n in names})
    m = fig.layout.margin
    assert fig.layout.height - m.t - m.b >= 0.4 * fig.layout.height
    assert len(fig.layout.shapes) == len(names)                              # a dashed size mark per group


@pytest.mark.parametrize("keys", [3, 7, 24])
def test_a_phone_heatmap_names_every_key_and_keeps_its_row_labels_to_their_share(keys):
    """On a phone's column (no hover) every key in view has its own tick label, whatever its length, and the
    row labels ("input → prediction", some long) take at most ROW_SHARE of the width, on two lines when rows
    allow; a small grid writes each weight in its cell."""
    from viz_transformer.plots import figure_rules as rules
    rng = np.random.default_rng(keys)
    k_pieces = [("▁engineering" if i % 3 == 0 else "我") for i in range(keys)]
    q_pieces = [f"▁a{'n' * (i % 5)} → ▁engineer{'s' * i}" for i in range(7)]
    w = rng.dirichlet(np.ones(keys), 7)
    with rules.screen(rules.PHONE_PX):
        fig = heatmaps.attention_heatmap(w, q_pieces, k_pieces, "t", "key (attended to)", "query (attending)")
    xa, ya, m = fig.layout.xaxis, fig.layout.yaxis, fig.layout.margin
    in_view = [i for i in range(keys) if xa.range[0] <= i <= xa.range[1]]
    named = list(xa.tickvals)
    assert all(fig.data[0].x[i] in named for i in in_view)                 # every key in view has a tick
    for i, text in zip(in_view, (xa.ticktext[named.index(fig.data[0].x[i])] for i in in_view)):
        assert f"{i}:{k_pieces[i]}".startswith(text.rstrip("…"))       # its own piece (cut with … if long)
    lines = [line for t in ya.ticktext for line in t.split("<br>")]
    assert max(map(text_px, lines)) <= rules.ROW_SHARE * rules.PHONE_PX
    for row, t in zip(ya.tickvals, ya.ticktext):                         # each row label is its row's, from the start
        assert row.replace(" ", "").startswith(t.replace("<br>", "").replace(" ", "").rstrip("…"))
    assert fig.data[0].texttemplate                                      # the phone's window: a small grid
    if fig.data[0].text is not None:                                     # short numbers (".62"): the weights
        shown = [float(v) for row in fig.data[0].text for v in row]
        assert np.allclose(shown, w.ravel(), atol=0.006)
