"""The figures of "Why this attention": a head's heatmap whose cells a tap picks, a score's terms with their sums,
and the logit's split over a layer × head grid."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots import heatmaps
from viz_transformer.plots.margins import y_side_px
from viz_transformer.plots.props import put
from viz_transformer.plots.style import VALUE_SCALE, as_array, escape


def pickable(fig: go.Figure, n_rows: int, n_cols: int, q_start: int, k_start: int, selected=None) -> go.Figure:
    """A heatmap of n_rows × n_cols cells (a window starting at query q_start, key k_start) made pickable: an
    invisible marker on each cell carries (query, key, value), what a click or a tap selects (Streamlit's selection
    reads points, which a heatmap trace does not give), and the heatmap's hover moves onto the markers (the closest
    point answers a click); the selected cell (query, key) is framed."""
    hm = fig.data[0]
    rows, cols, z = list(hm.y), list(hm.x), np.asarray(hm.z, dtype=np.float64)
    cells = [(i, j) for i in range(n_rows) for j in range(n_cols)]
    fig.add_trace(go.Scatter(x=[cols[j] for _, j in cells], y=[rows[i] for i, _ in cells], mode="markers",
                             showlegend=False, marker=dict(size=12, opacity=0, symbol="square"),
                             customdata=[[q_start + i, k_start + j, z[i, j]] for i, j in cells],
                             hovertemplate=hm.hovertemplate.replace("%{z:", "%{customdata[2]:"),
                             selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0))))
    hm.hoverinfo, hm.hovertemplate = "skip", None
    if selected is not None:
        i, j = selected[0] - q_start, selected[1] - k_start
        if 0 <= i < n_rows and 0 <= j < n_cols:
            fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5, line=dict(color="#d62728", width=3))
    put(fig.layout, clickmode="event+select", hovermode="closest", dragmode=False)
    return fig


def with_sums(matrix) -> np.ndarray:
    """matrix with a last column of its row sums and a last row of its column sums (the total in the corner)."""
    m = as_array(matrix).astype(np.float64)
    m = np.concatenate([m, m.sum(1, keepdims=True)], 1)
    return np.concatenate([m, m.sum(0, keepdims=True)], 0)


def terms_heatmap(matrix, row_labels: Sequence[str], col_labels: Sequence[str], sum_label: str, title: str,
                  xlabel: str, ylabel: str, colorbar: str, width=None) -> go.Figure:
    """A score's terms, query parts (rows) × key parts (columns), with each row's and column's sum and the total
    (labelled sum_label); the scale is set by the terms, not the sums, so a small term stays visible."""
    m = with_sums(matrix)
    lim = float(np.abs(as_array(matrix)).max()) or 1.0
    fig = heatmaps.heatmap(m, [escape(r) for r in row_labels] + [escape(sum_label)],
                           [escape(c) for c in col_labels] + [escape(sum_label)], title, xlabel, ylabel,
                           colorbar=colorbar, colorscale=VALUE_SCALE, zmin=-lim, zmax=lim, hover=colorbar,
                           width=width)
    n_r, n_c = m.shape
    for x0, x1, y0, y1 in ((n_c - 1.5, n_c - 1.5, -0.5, n_r - 0.5), (-0.5, n_c - 0.5, n_r - 1.5, n_r - 1.5)):
        fig.add_shape(type="line", x0=x0, x1=x1, y0=y0, y1=y1, line=dict(color="black", width=2))   # sums apart
    return fig


def logit_grid(values, row_labels: Sequence[str], title: str, row_axis: str, head_axis: str, colorbar: str,
               hover: str) -> go.Figure:
    """Each head's contribution to a logit: heatmaps.head_grid with its rows named (a layer's self- and
    cross-attention each a row)."""
    fig = heatmaps.head_grid(values, title, row_axis, head_axis, colorbar=colorbar, hover=hover,
                             fmt=".1f" if rules.narrow() else ".2f")          # a phone's cells fit one decimal
    names = [escape(r) for r in row_labels]
    put(fig.layout.yaxis, ticktext=names)
    fig.layout.margin.l = max(fig.layout.margin.l or 0, y_side_px(names, titled=True) + 10)   # the names, not numbers
    return fig
