"""Margins decided on the server (plot_margins): no axis leaves its margin to Plotly's automargin redraws,
the margins hold the labels, and long axes label every k-th token only while hover keeps every one."""
import numpy as np

from viz_transformer import plots
from viz_transformer.plot_margins import MIN_LABEL_GAP, every_kth, fit_margins, text_px


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
    figs = [plots.attention_heatmap(np.full((3, 3), 1 / 3), long, long, "t"),
            plots.probability_bars(long, [0.5, 0.3, 0.2], "p"),
            plots.curves([1, 2, 3], {"a": [1, 2, 3]}, "c", "x", "y"),
            plots.line_view([np.full((3, 3), 1 / 3)], long, long, ["h0"], "lines")]
    for fig in figs:
        assert all(ax.automargin is False for ax in _axes(fig)), fig.layout.title.text
    bars = figs[1]                                          # token labels on the left
    assert bars.layout.margin.l >= text_px(plots.labels(long)[0])
    heat = figs[0]                                          # turned by 45° at the bottom, straight on the left
    widest = text_px(plots.labels(long)[0])
    assert heat.layout.margin.l >= widest and heat.layout.margin.b <= widest * 0.75 + 60


def test_a_right_hand_axis_added_later_gets_its_margin():
    fig = plots.curves([1, 2], {"a": [1, 2]}, "c", "x", "y")
    fig.update_layout(yaxis2=dict(title=dict(text="BLEU"), overlaying="y", side="right"))
    before = fig.layout.margin.r
    fit_margins(fig)
    assert fig.layout.margin.r > before and fig.layout.yaxis2.automargin is False


def test_a_long_heatmap_labels_some_tokens_and_hovers_all():
    pieces = [f"p{i}" for i in range(512)]
    fig = plots.attention_heatmap(np.full((512, 512), 1 / 512), pieces, pieces, "t")
    ticks = list(fig.layout.yaxis.tickvals)
    assert 20 <= len(ticks) <= 120 and set(ticks) <= set(fig.data[0].y)
    assert list(fig.data[0].x) == plots.labels(pieces)       # every cell still carries its token for hover
    small = plots.attention_heatmap(np.full((8, 8), 1 / 8), pieces[:8], pieces[:8], "t")
    assert small.layout.yaxis.tickvals is None               # few tokens: every one labelled
