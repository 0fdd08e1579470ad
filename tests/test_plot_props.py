"""props.put sets what plotly's own update() sets: the same figure JSON, for the properties the layout code gives
(nested dicts merged into what a property holds, numbers, None, lists), and style.layout's whole result equals
the same steps done with update_layout / update_xaxes / update_yaxes, on one plot and on subplots, desktop and
phone."""
from __future__ import annotations

import copy

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots import margins, style
from viz_transformer.plots.props import put


def _figure(held: bool) -> go.Figure:
    labels = [f"{i}:片{i}" for i in range(9)]
    fig = go.Figure(go.Heatmap(z=np.arange(81.0).reshape(9, 9), x=labels, y=labels))
    if held:     # properties set before: a merge keeps them, a replacement would drop them
        fig.update_layout(title=dict(font=dict(size=19, color="red"), pad=dict(l=3)), margin=dict(pad=7, l=1),
                          height=280, xaxis=dict(title=dict(font=dict(size=9)), tickangle=45))
    return fig


CASES = [dict(title=dict(text="a <b> title", x=0.0, xanchor="left", y=1.0, yref="container", yanchor="top",
                         pad=dict(t=16)), height=400, colorway=style.PALETTE),
         dict(height=None, margin=dict(l=31, r=12, b=44, t=70)),
         dict(xaxis=dict(title=dict(text="key", font=dict(color="blue")), tickvals=[1, 2]), showlegend=False),
         dict(title=dict(font=dict(size=11)), legend=dict(orientation="h", y=1.02))]


@pytest.mark.parametrize("held", [False, True])
@pytest.mark.parametrize("props", CASES)
def test_put_sets_what_update_sets(props, held):
    ours, plotlys = _figure(held), _figure(held)
    put(ours.layout, **copy.deepcopy(props))
    plotlys.layout.update(**copy.deepcopy(props))
    assert ours.to_plotly_json() == plotlys.to_plotly_json()


def _layout_with_updates(fig, title, xlabel, ylabel, height=None):
    """style.layout's steps with plotly's update calls (how it did them before props.put)."""
    width = rules.figure_px()
    text = rules.wrap(style.escape(title), width - 20)
    fig.update_layout(title=dict(text=text, x=0.0, xanchor="left", y=1.0, yref="container", yanchor="top",
                                 pad=dict(t=style.title_pad())), height=height, colorway=style.PALETTE)
    fig.update_xaxes(title_text=style.escape(xlabel))
    fig.update_yaxes(title_text=style.escape(ylabel))
    fig.layout.template = style._WHITE
    side = copy.deepcopy(fig.layout.margin.to_plotly_json())
    margins.fit_margins(fig, top=style.title_top(text), width=width)
    fitted = fig.layout.margin.to_plotly_json()
    fig.layout.margin = side                                  # fit_margins' numbers, set by update_layout
    fig.update_layout(margin={k: fitted[k] for k in "lrbt"})
    if height is not None and rules.narrow():
        m = fig.layout.margin
        fig.update_layout(height=max(height, int(m.t + m.b + rules.PHONE_PLOT_H)))
    return fig


def _subplots() -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("one", "two"))
    for col in (1, 2):
        fig.add_trace(go.Scatter(x=["我", "是", "一名"], y=[1, 2, 3], name=f"s{col}"), row=1, col=col)
    return fig


@pytest.mark.parametrize("px", [rules.FIGURE_PX, rules.PHONE_PX])
@pytest.mark.parametrize("make", [lambda: _figure(False), lambda: _figure(True), _subplots])
def test_style_layout_is_the_update_calls_result(make, px):
    title = "Layer 1 · head 2: attention from each query <i>piece</i> to each key piece, a long title that wraps"
    with rules.screen(px):
        ours = style.layout(make(), title, "key", "query <q>", height=300)
        reference = _layout_with_updates(make(), title, "key", "query <q>", height=300)
    assert ours.to_plotly_json() == reference.to_plotly_json()
