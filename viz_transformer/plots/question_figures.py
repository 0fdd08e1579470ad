"""Figures of a lesson question (analysis.questions): the key row a student clicks, and each kind's evidence
with the answer highlighted. Pure functions, no streamlit; labels escaped as in every plots module.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.decoding_figures import probability_bars
from viz_transformer.plots.heatmaps import attention_heatmap, heatmap
from viz_transformer.plots.style import PALETTE, escape, labels, layout

ANSWER = "#d62728"          # the model's answer: a red frame
PICKED = "#ff7f0e"          # the student's pick, when it differs: a dashed orange frame
HIDDEN = [[0.0, "#f0f0f0"], [1.0, "#f0f0f0"]]


def _frame(fig: go.Figure, x: str, y: str, color: str, dash: str = "solid") -> None:
    """A frame around the category cell (x, y) of a heatmap."""
    xs, ys = list(fig.data[0].x), list(fig.data[0].y)
    i, j = xs.index(x), ys.index(y)
    fig.add_shape(type="rect", x0=i - 0.5, x1=i + 0.5, y0=j - 0.5, y1=j + 0.5, xref="x", yref="y",
                  line=dict(color=color, width=4, dash=dash), fillcolor="rgba(0,0,0,0)")


def key_row(weights: Sequence[float], keys: Sequence[str], allowed: Sequence[bool], query: str, row: int, title: str,
            revealed: bool, best: Optional[int] = None, picked: Optional[int] = None, xlabel: str = "key",
            ylabel: str = "query", colorbar: str = "attention weight", hover: str = "click to choose") -> go.Figure:
    """One query row over its keys. Before the reveal the weights are hidden (blank cells, masked keys grey)
    and every allowed cell is clickable: an invisible marker on it (customdata = the key's index), since a
    click on a heatmap cell itself reports no point to Streamlit. After: the weights, the heaviest key
    framed in red, the student's other pick dashed."""
    w = np.asarray(weights, dtype=np.float32)[None, :]                    # (1, K)
    mask = np.asarray(allowed, dtype=bool)[None, :]
    x = labels(keys)
    if revealed:
        fig = attention_heatmap(np.where(mask, w, np.nan), [query], keys, title, xlabel, ylabel, colorbar, q_start=row)
        y = list(fig.data[0].y)
        if picked is not None and picked != best:
            _frame(fig, x[picked], y[0], PICKED, "dash")
        if best is not None:
            _frame(fig, x[best], y[0], ANSWER)
        return fig
    fig = heatmap(np.where(mask, 0.0, np.nan), labels([query], row), x, title, xlabel, ylabel, colorbar=colorbar,
                  colorscale=HIDDEN, zmin=0, zmax=1, show_values=False, hover=hover)
    fig.update_traces(showscale=False, hoverinfo="skip", hovertemplate=None, selector=dict(type="heatmap"))
    y = list(fig.data[0].y)
    cols = [i for i, a in enumerate(allowed) if a]
    fig.add_trace(go.Scatter(x=[x[i] for i in cols], y=[y[0]] * len(cols), mode="markers", showlegend=False,
                             marker=dict(size=30, opacity=0, symbol="square"), customdata=cols,
                             hovertemplate="%{x}<br>" + escape(hover) + "<extra></extra>"))
    if picked is not None:
        _frame(fig, x[picked], y[0], PICKED, "dash")
    return fig


def candidates(pieces: Sequence[str], probs: Sequence[float], chosen: int, title: str, xlabel: str = "probability",
               ylabel: str = "candidate token") -> go.Figure:
    """The step's top candidates, most likely first, the greedy pick outlined (decoding_figures.probability_bars)."""
    return probability_bars(pieces, probs, title, chosen=chosen, xlabel=xlabel, ylabel=ylabel)


def outputs(with_head: Sequence[str], without: Sequence[str], title: str, with_label: str = "with the head",
            without_label: str = "head knocked out", xlabel: str = "output position", ylabel: str = "",
            colorbar: str = "differs") -> go.Figure:
    """The greedy output with and without the head, piece by piece: cells where they differ are red."""
    n = max(len(with_head), len(without), 1)
    rows = [list(with_head) + [""] * (n - len(with_head)), list(without) + [""] * (n - len(without))]
    differs = np.array([[float(a != b) for a, b in zip(*rows)]] * 2)
    fig = go.Figure(go.Heatmap(z=differs, x=list(range(n)), y=[escape(with_label), escape(without_label)],
                               text=[[escape(p) for p in r] for r in rows], texttemplate="%{text}",
                               textfont=dict(size=rules.VALUE_PX), zmin=0, zmax=1, showscale=False, xgap=2, ygap=2,
                               colorscale=[[0.0, "#deebf7"], [1.0, "#fcbba1"]],
                               hovertemplate="%{y}, %{x}: %{text}<extra>" + escape(colorbar) + ": %{z}</extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    if n > 16:                                          # a long story: the first 16 pieces, dragged for more
        fig.update_xaxes(range=[-0.5, 15.5])
        fig.update_layout(dragmode="pan")
    return layout(fig, title, xlabel, ylabel, height=220)


def _outlined_bars(values: dict[str, float], winner: Optional[str], names: Optional[dict[str, str]]) -> go.Figure:
    """One bar a key of `values` (named by `names`), its value written on it, the winner outlined in red."""
    keys = list(values)
    shown = [escape((names or {}).get(k, k)) for k in keys]
    fig = go.Figure(go.Bar(x=shown, y=[values[k] for k in keys], text=[f"{values[k]:.2f}" for k in keys],
                           textposition="outside", marker=dict(color=PALETTE[0],
                           line=dict(color=ANSWER, width=[4 if k == winner else 0 for k in keys])),
                           hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    fig.update_xaxes(type="category")
    return fig


def role_scores(stats: dict[str, float], threshold: float, winner: Optional[str], title: str,
                names: Optional[dict[str, str]] = None, xlabel: str = "role", ylabel: str = "mean weight",
                threshold_label: str = "threshold") -> go.Figure:
    """Each role's statistic as a bar (0..1), the threshold a role must reach as a dashed line, the winning
    role outlined in red (none outlined when no role reaches it). names: role -> label shown."""
    fig = _outlined_bars(stats, winner, names)
    fig.add_hline(y=threshold, line=dict(color="#636363", dash="dash"),
                  annotation_text=escape(f"{threshold_label} {threshold:g}"), annotation_position="top left")
    fig.update_yaxes(range=[0, 1.1])
    return layout(fig, title, xlabel, ylabel, height=320)


def answer_counts(options: Sequence[str], counts: Sequence[int], title: str, xlabel: str = "",
                  ylabel: str = "") -> go.Figure:
    """A class's answers to one question: one bar per option (every option, also at 0) with its count
    written on it; options are shown as text (escaped), whole numbers on y."""
    ys = [int(c) for c in counts]
    top = max(ys, default=0)
    fig = go.Figure(go.Bar(x=[escape(x) for x in options], y=ys, text=ys, textposition="outside",
                           marker_color=PALETTE[0], hovertemplate="%{x}: %{y}<extra></extra>"))
    fig.update_xaxes(type="category")
    fig.update_yaxes(rangemode="tozero", dtick=max(1, (top + 4) // 5), range=[0, top * 1.2 + 1])
    return layout(fig, title, xlabel, ylabel, height=320)


def two_votes(options: Sequence[str], first: Sequence[int], second: Sequence[int], title: str, names: Sequence[str],
              right: Optional[int] = None, xlabel: str = "", ylabel: str = "") -> go.Figure:
    """A question's two votes side by side (peer instruction: alone, then after discussion): per option a bar for
    each vote with its count written on it; names: the two votes' legend entries; right: the right option's
    index, marked ✓ in its label once the answer is revealed."""
    xs = [escape(x) + (" ✓" if i == right else "") for i, x in enumerate(options)]
    fig = go.Figure()
    for ys, name, color in ((first, names[0], PALETTE[0]), (second, names[1], PALETTE[1])):
        ys = [int(c) for c in ys]
        fig.add_trace(go.Bar(x=xs, y=ys, text=ys, textposition="outside", name=escape(name), marker_color=color,
                             hovertemplate="%{x}: %{y}<extra>" + escape(name) + "</extra>"))
    top = max([int(c) for c in (*first, *second)], default=0)
    fig.update_xaxes(type="category")
    fig.update_yaxes(rangemode="tozero", dtick=max(1, (top + 4) // 5), range=[0, top * 1.25 + 1])
    fig.update_layout(barmode="group", legend=dict(orientation="h", yanchor="top", y=-0.14, x=0, xanchor="left"))
    fig = layout(fig, title, xlabel, ylabel, height=380)        # the legend under the axis: never over the title
    fig.update_layout(margin=dict(b=fig.layout.margin.b + 30))
    return fig


def score_sources(groups: dict[str, float], winner: str, title: str, names: Optional[dict[str, str]] = None,
                  xlabel: str = "what the key brings", ylabel: str = "share of the score") -> go.Figure:
    """The score of one key split by where its part comes from (questions.why_key): one bar a group (negative ones
    below the axis), the largest outlined."""
    fig = _outlined_bars(groups, winner, names)
    fig.add_hline(y=0, line=dict(color="#636363"))
    return layout(fig, title, xlabel, ylabel, height=320)
