"""Plotly figures for attention beside attribution: one row per method over the input pieces (each row on its own
scale, the pieces ranked most unlike occlusion marked), and the distribution of τ with occlusion over a corpus.

No streamlit import; labels are escaped here.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.heatmaps import heatmap
from viz_transformer.plots.style import PALETTE, VALUE_SCALE, escape, labels, layout

MARK = "#000000"        # the outline of a piece ranked most unlike occlusion


def method_rows(scores: dict[str, Sequence[float]], pieces: Sequence[str], row_labels: dict[str, str], title: str,
                xlabel: str, ylabel: str, colorbar: str, hover: str, marks: Optional[dict[str, Sequence[int]]] = None,
                start: int = 0, stop: Optional[int] = None, width: Optional[int] = None) -> go.Figure:
    """Methods × pieces. Each row divided by its own largest |score|, so each row has its own scale in −1..1
    (attention and norms are ≥ 0; occlusion's drop may be < 0): the colour says how a piece ranks within its row;
    the hover gives the score itself. marks: per method, the pieces (indices into `pieces`) outlined in black.
    start, stop: the window of pieces shown (the page's slider), labels keep the pieces' own numbers."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    stop = len(pieces) if stop is None else stop
    names = list(scores)
    raw = np.array([np.asarray(scores[m], dtype=np.float64)[start:stop] for m in names])      # (M, window)
    top = np.abs(raw).max(1, keepdims=True)
    z = np.divide(raw, top, out=np.zeros_like(raw), where=top > 0)
    rows, cols = [escape(row_labels[m]) for m in names], labels(pieces[start:stop], start)
    fig = heatmap(z, rows, cols, title, xlabel, ylabel, colorbar=colorbar, colorscale=VALUE_SCALE, zmin=-1.0,
                  zmax=1.0, show_values=False, hover=colorbar, width=width)
    fig.update_traces(customdata=raw, hovertemplate=f"%{{y}}<br>{escape(xlabel)}: %{{x}}<br>{escape(hover)}: "
                                                   f"%{{customdata:.4g}}<extra></extra>")
    xs, ys = [], []
    for m, picked in (marks or {}).items():
        for j in picked:
            if m in scores and start <= j < stop:
                xs.append(cols[j - start])
                ys.append(escape(row_labels[m]))
    if xs:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", hoverinfo="skip", showlegend=False,
                                 marker=dict(symbol="square-open", size=11, color=MARK, line=dict(width=2))))
    return fig


def tau_distribution(taus: dict[str, Sequence[float]], title: str, xlabel: str, ylabel: str,
                     width: Optional[int] = None) -> go.Figure:
    """One box per method: its τ with occlusion over every output step of a corpus, −1..1, with a line at 0."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    fig = go.Figure()
    for k, (name, vals) in enumerate(taus.items()):
        v = np.asarray(vals, dtype=np.float64)
        fig.add_trace(go.Box(y=v[np.isfinite(v)], name=escape(name), marker_color=PALETTE[k % len(PALETTE)],
                             boxmean=True, showlegend=False))
    fig.add_hline(y=0.0, line=dict(color="#636363", width=1, dash="dot"))
    fig.update_yaxes(range=[-1.05, 1.05], zeroline=False)
    layout(fig, title, xlabel, ylabel, height=420, width=width)
    return fig
