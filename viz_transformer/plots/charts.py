"""Line and bar charts: named curves over a shared or own x, grouped bars, and one token's probability under
two models. Pure functions returning go.Figure, like heatmaps.py (no streamlit)."""
from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.margins import text_px
from viz_transformer.plots.numbers import fmt_probs
from viz_transformer.plots.props import put
from viz_transformer.plots.style import escape, labels, layout, to_numpy


def curves(x, series: dict[str, Sequence[float]], title: str, xlabel: str, ylabel: str,
           log_x: bool = False, log_y: bool = False, height: int = 380, width: Optional[int] = None) -> go.Figure:
    """Named lines over a shared x (a legend instead of a colour bar: colour = series)."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    return xy_curves({name: (x, ys) for name, ys in series.items()}, title, xlabel, ylabel, log_x, log_y, height, width)


def xy_curves(series: dict[str, tuple[Sequence[float], Sequence[float]]], title: str, xlabel: str, ylabel: str,
              log_x: bool = False, log_y: bool = False, height: int = 380, width: Optional[int] = None,
              mark_x: Optional[float] = None, styles: Optional[Sequence[dict]] = None) -> go.Figure:
    """Named lines, each over its own x ({name: (x, y)}); mark_x: a vertical line (e.g. the step shown); styles: a
    plotly line dict per series (colour, dash, width) where the lines come in groups, instead of one dash each."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    fig = go.Figure()
    dashes = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]   # coinciding lines stay visible
    for n, (name, (x, ys)) in enumerate(series.items()):
        line = styles[n] if styles else dict(dash=dashes[n % len(dashes)], width=2.5 - 0.3 * n)
        fig.add_trace(go.Scatter(x=list(x), y=to_numpy(ys), mode="lines+markers" if len(x) <= 30 else "lines",
                                 name=escape(name), line=line))
    if mark_x is not None:
        fig.add_vline(x=mark_x, line=dict(color="#d62728", width=1.5))
    axes = dict(xaxis=dict(type="log" if log_x else "linear"), yaxis=dict(type="log" if log_y else "linear"))
    if len(series) <= 4:
        put(fig.layout, **axes, legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))
        return layout(fig, title, xlabel, ylabel, height, width=width)
    # many lines: the legend goes under the axis, one line each, so on a phone it never covers the title
    put(fig.layout, **axes, legend=dict(orientation="h", yanchor="top", y=-0.18, x=0, xanchor="left",
                                        entrywidthmode="fraction", entrywidth=1.0))
    fig = layout(fig, title, xlabel, ylabel, height + 22 * len(series), width=width)
    put(fig.layout, margin=dict(b=fig.layout.margin.b + 22 * len(series)))
    return fig


def grouped_bars(categories: Sequence[str], series: dict[str, Sequence[float]], title: str, xlabel: str,
                 ylabel: str, height: int = 360) -> go.Figure:
    """Bars side by side per category (a legend names the series). Categories must be escaped."""
    fig = go.Figure([go.Bar(x=list(categories), y=to_numpy(v), name=escape(k)) for k, v in series.items()])
    fig.layout.xaxis.type = "category"
    rules.category_ticks(fig.layout.xaxis, list(categories), (rules.figure_px() - 100) / max(len(categories), 1))
    put(fig.layout, barmode="group", legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))
    return layout(fig, title, xlabel, ylabel, height)


def before_after_bars(pieces: Sequence[str], before, after, title: str, before_label: str = "before",
                      after_label: str = "after", xlabel: str = "output token", ylabel: str = "probability",
                      height: int = 380) -> go.Figure:
    """Each output token's probability under two models (bars side by side; 0..1)."""
    cell = (rules.figure_px() - 100) / max(len(pieces), 1)                  # a token's pair of bars
    numbers = cell / 2 >= text_px("0.00", rules.VALUE_PX) + 4       # each bar's number fits above it
    fig = go.Figure([go.Bar(x=labels(pieces), y=to_numpy(v), name=escape(n), customdata=fmt_probs(to_numpy(v)),
                            text=fmt_probs(to_numpy(v)) if numbers else None, textposition="outside",
                            textfont=dict(size=rules.VALUE_PX),
                            hovertemplate="%{x}: %{customdata}<extra>" + escape(n) + "</extra>")
                     for n, v in ((before_label, before), (after_label, after))])
    fig.layout.xaxis.type = "category"
    rules.category_ticks(fig.layout.xaxis, labels(pieces), cell)
    put(fig.layout, yaxis=dict(range=[0, 1.1]), barmode="group",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right"))
    return layout(fig, title, xlabel, ylabel, height)
