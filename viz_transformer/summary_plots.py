"""Plotly figures for the summaries: a statistic per layer × head (clickable), rollout and attribution.

No streamlit import; labels are escaped as in plots.py.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go

from .plots import ATTN_SCALE, _layout, _np, attention_heatmap, escape


def stat_grid(values, title: str, layer_label: str = "layer", head_label: str = "head", colorbar: str = "value",
              zmax: Optional[float] = None, marked: Sequence[tuple[int, int]] = (), hover: str = "click to open",
              fmt: str = ".2f") -> go.Figure:
    """[layer, head] non-negative values on a sequential scale from 0 (to zmax, default the largest),
    the number in each cell, and an invisible clickable marker per cell: customdata = [layer, head, value].
    NaN cells (a statistic a block does not have) stay grey."""
    a = _np(values)
    L, H = a.shape
    finite = a[np.isfinite(a)]
    top = zmax if zmax is not None else (float(finite.max()) if finite.size else 1.0)
    fig = go.Figure(go.Heatmap(z=np.where(np.isfinite(a), a, np.nan), x=list(range(H)), y=list(range(L)),
                               colorscale=ATTN_SCALE, zmin=0, zmax=top or 1.0, hoverinfo="skip",
                               texttemplate=f"%{{z:{fmt}}}", textfont=dict(size=10),
                               colorbar=dict(title=dict(text=escape(colorbar)))))
    cells = [(l, h) for l in range(L) for h in range(H)]
    fig.add_trace(go.Scatter(x=[h for _, h in cells], y=[l for l, _ in cells], mode="markers", showlegend=False,
                             marker=dict(size=24, opacity=0, symbol="square"),
                             customdata=[[l, h, float(a[l, h]) if np.isfinite(a[l, h]) else None] for l, h in cells],
                             hovertemplate=f"{escape(layer_label)} %{{customdata[0]}}, {escape(head_label)} "
                                           f"%{{customdata[1]}}: %{{customdata[2]:{fmt}}}<br>{escape(hover)}"
                                           "<extra></extra>",
                             selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0))))
    for l, h in marked:
        fig.add_shape(type="rect", x0=h - 0.5, x1=h + 0.5, y0=l - 0.5, y1=l + 0.5, line=dict(color="#d62728", width=3))
    fig.update_xaxes(tickvals=list(range(H)), showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=list(range(L)), autorange="reversed", showgrid=False, zeroline=False)
    fig.update_layout(hovermode="closest", hoverdistance=-1, clickmode="event+select", dragmode=False, plot_bgcolor="#d9d9d9")
    return _layout(fig, title, head_label, layer_label, height=max(220, 110 + 45 * L))


def relevance_heatmap(matrix, q_pieces: Sequence[str], k_pieces: Sequence[str], title: str,
                      xlabel: str, ylabel: str, colorbar: str = "relevance") -> go.Figure:
    """A rollout or attribution matrix [q, k] (rows sum to 1), drawn like an attention pattern."""
    return attention_heatmap(matrix, q_pieces, k_pieces, title, xlabel, ylabel, colorbar=colorbar)

