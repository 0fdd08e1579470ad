"""Figures for comparing models and for training playback: pure functions returning go.Figure.

Builds on plots.py (same escaping, colour scales and layout); no streamlit.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.charts import curves
from viz_transformer.plots.margins import fit_margins
from viz_transformer.plots.style import escape, layout, title_top, to_numpy

SERIES_COLOURS = {"encoder_decoder": "#1f77b4", "decoder_only": "#d62728", "prefix_lm": "#2ca02c"}


def mark_segments(fig: go.Figure, boundaries: Sequence[int], names: Sequence[str], axes: str = "xy") -> go.Figure:
    """Lines between the parts of one sequence on a categorical heatmap (boundary b: between
    position b - 1 and b), and each part's name above the plot ("" for none). names has
    len(boundaries) + 1."""
    line = dict(color="#d62728", width=2, dash="dot")
    shapes = []                  # one layout update: add_vline/add_hline validate the whole layout again on each call
    for b in boundaries:
        if "x" in axes:
            shapes.append(dict(type="line", xref="x", x0=b - 0.5, x1=b - 0.5, yref="y domain", y0=0, y1=1, line=line))
        if "y" in axes:
            shapes.append(dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=b - 0.5, y1=b - 0.5, line=line))
    n = len(fig.data[0].x) if fig.data and fig.data[0].x is not None else boundaries[-1] + 1
    edges = [0, *boundaries, n]
    notes = [dict(x=(a + b - 1) / 2, y=1.0, yref="paper", yanchor="bottom", text=escape(name), showarrow=False,
                  font=dict(color="#d62728", size=12))
             for name, a, b in zip(names, edges[:-1], edges[1:]) if b > a and name]
    fig.update_layout(shapes=[*fig.layout.shapes, *shapes], annotations=[*fig.layout.annotations, *notes])
    return fig


def spectra(series: dict[str, np.ndarray], title: str, xlabel: str = "rank (largest first)",
            ylabel: str = "singular value ÷ largest", colours: Optional[dict[str, str]] = None) -> go.Figure:
    """Normalised singular values, one line per head, grouped by series (a legend entry each)."""
    fig = go.Figure()
    for name, s in series.items():
        s = to_numpy(s)
        s = s / np.maximum(s[:, :1], 1e-30)
        colour = (colours or {}).get(name)
        for h, row in enumerate(s):
            fig.add_trace(go.Scatter(x=np.arange(1, len(row) + 1), y=row, mode="lines", legendgroup=escape(name),
                                     name=escape(name), showlegend=h == 0, opacity=0.7,
                                     line=dict(color=colour, width=1.5),
                                     hovertemplate=f"{escape(name)}, head {h}<br>%{{x}}: %{{y:.3g}}<extra></extra>"))
    fig.update_yaxes(type="log")
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, xanchor="left"))
    return layout(fig, title, xlabel, ylabel, 380)


def rank_strip(groups: dict[str, Sequence[float]], title: str, xlabel: str, ylabel: str = "effective rank",
               sizes: Optional[dict[str, int]] = None) -> go.Figure:
    """Effective rank of every head, one column of points per group; a dashed mark at each group's
    size (the largest rank possible)."""
    fig = go.Figure()
    keyed = rules.narrow()         # a phone: the groups named in a legend under the plot, not slanted
    for i, (name, vals) in enumerate(groups.items()):
        v = to_numpy(vals)
        jitter = (np.arange(len(v)) % 8 - 3.5) * 0.04
        fig.add_trace(go.Scatter(x=i + jitter, y=v, mode="markers", name=escape(name), showlegend=keyed,
                                 marker=dict(size=8, opacity=0.8),
                                 hovertemplate=f"{escape(name)}<br>effective rank %{{y:.2f}}<extra></extra>"))
        if sizes and name in sizes:
            fig.add_shape(type="line", x0=i - 0.3, x1=i + 0.3, y0=sizes[name], y1=sizes[name],
                          line=dict(color="#7f7f7f", dash="dash"))
    fig.update_xaxes(tickvals=list(range(len(groups))), ticktext=["" if keyed else escape(g) for g in groups])
    fig.update_yaxes(rangemode="tozero")
    if keyed:
        fig.update_layout(legend=dict(orientation="v", yanchor="top", y=-0.12, x=0, xanchor="left"))
        fig = layout(fig, title, xlabel, ylabel, 300)
        fig.update_layout(height=fig.layout.height + 22 * len(groups), margin=dict(b=fig.layout.margin.b + 22 * len(groups)))
        return fig
    return layout(fig, title, xlabel, ylabel, 520)     # tall: the group names slant below the plot


def training_curves(steps: Sequence[int], loss: Sequence[Optional[float]], bleu: Sequence[Optional[float]],
                    current: Optional[int], title: str, loss_curve: Sequence[tuple[int, float]] = (),
                    step_label: str = "step", loss_label: str = "training loss", bleu_label: str = "validation BLEU",
                    shipped: Optional[int] = None, shipped_label: str = "shipped") -> go.Figure:
    """Loss (left axis, the fine curve and the snapshot points) and BLEU (right axis) over steps,
    with the current snapshot marked by a vertical line; the x axis is logarithmic (step 0 at 0.5)."""
    x0 = lambda s: max(s, 0.5)                       # noqa: E731  log axis: step 0 drawn at 0.5
    fig = go.Figure()
    if loss_curve:
        fig.add_trace(go.Scatter(x=[x0(s) for s, _ in loss_curve], y=[v for _, v in loss_curve], mode="lines",
                                 name=escape(loss_label), line=dict(color="#1f77b4", width=1.5)))
    pts = [(x0(s), v) for s, v in zip(steps, loss) if v is not None]
    if pts:
        fig.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", showlegend=False,
                                 marker=dict(color="#1f77b4", size=7), name=escape(loss_label)))
    fig.add_trace(go.Scatter(x=[x0(s) for s in steps], y=[b for b in bleu], mode="lines+markers", yaxis="y2",
                             name=escape(bleu_label), line=dict(color="#ff7f0e", width=2)))
    if current is not None:
        fig.add_vline(x=x0(current), line=dict(color="#d62728", width=2))
    if shipped is not None:
        fig.add_vline(x=x0(shipped), line=dict(color="#2ca02c", width=1.5, dash="dash"),
                      annotation_text=escape(shipped_label), annotation_position="top left")
    fig.update_xaxes(type="log")
    fig = layout(fig, title, step_label, loss_label, 360)       # titles every y axis: the BLEU axis after it
    fig.update_layout(yaxis2=dict(title=dict(text=escape(bleu_label)), overlaying="y", side="right", rangemode="tozero",
                                  showgrid=False),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=1, xanchor="right"))
    return fit_margins(fig, title_top(fig.layout.title.text), **({"width": rules.figure_px()} if rules.narrow() else {}))


def layer_gradients(layers: Sequence[str], series: dict[str, Sequence[float]], title: str, xlabel: str,
                    ylabel: str) -> go.Figure:
    """Per-layer gradient norms (training.grad_norms), one line per norm placement, the layers named on x
    from the input to the output."""
    fig = curves(list(range(len(layers))), series, title, xlabel, ylabel)
    fig.update_xaxes(tickvals=list(range(len(layers))), ticktext=[escape(n) for n in layers])
    fig.update_yaxes(rangemode="tozero")
    return fig
