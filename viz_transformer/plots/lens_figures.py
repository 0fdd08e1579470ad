"""Plotly figures for the logit lens and activation patching: pure functions, no streamlit.

Token labels are escaped through plots.escape / plots.labels, as everywhere.
"""
from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.numbers import fmt_probs
from viz_transformer.plots.margins import text_px
from viz_transformer.plots.heatmaps import values_heatmap
from viz_transformer.plots.style import ATTN_SCALE, colorbar_under, escape, labels, layout, to_numpy


def lens_grid(final_prob, top_pieces: Sequence[Sequence[str]], row_names: Sequence[str], positions: Sequence[str],
              final_pieces: Sequence[str], title: str, xlabel: str, ylabel: str, colorbar: str,
              output_start: int = 0, marked: Optional[int] = None, hover_top: str = "top token",
              window: Optional[tuple[int, int]] = None) -> go.Figure:
    """Rows (embeddings at the bottom, last layer at the top) × decoder positions: colour = P(the final
    token of that position) read at that row, text = the row's top token there. Columns from
    `output_start` on predict the output; `marked` (a position) gets a frame. window: (a, b) shows
    positions a … b-1 only (labels keep their real positions)."""
    a, b = window or (0, len(positions))
    p = to_numpy(final_prob)[:, a:b]
    R, T = p.shape
    cols = [f"{c} → {escape(f)}" for c, f in zip(labels(positions[a:b], a), final_pieces[a:b])]
    flat = rules.narrow()              # a phone: the colour bar under the grid
    bar_w = 0 if flat else rules.COLORBAR_PX
    cell = (rules.figure_px() - max(map(text_px, row_names), default=0) - 70 - bar_w) / max(T, 1)
    text = [[escape(rules.fit_text(top_pieces[r][a + c], cell - 8, 11)) for c in range(T)] for r in range(R)]
    full = [[escape(top_pieces[r][a + c]) for c in range(T)] for r in range(R)]
    output_start, marked = output_start - a, None if marked is None else marked - a
    shown = [fmt_probs(row) for row in p]
    tr = go.Heatmap(z=p, x=cols, y=[escape(r) for r in row_names], text=text, texttemplate="%{text}", hovertext=full,
                    customdata=shown,
                    textfont=dict(size=11), colorscale=ATTN_SCALE, zmin=0.0, zmax=1.0,
                    colorbar=dict(title=dict(text=escape(colorbar))), xgap=1, ygap=1,
                    hovertemplate=f"{escape(ylabel)}: %{{y}}<br>{escape(xlabel)}: %{{x}}<br>"
                                  f"{escape(hover_top)}: %{{hovertext}}<br>P: %{{customdata}}<extra></extra>")
    fig = go.Figure(tr)
    fig.update_xaxes(type="category", tickangle=-45 if T > 4 else 0)
    fig.update_yaxes(type="category")
    if 0 < output_start < T:
        fig.add_vline(x=output_start - 0.5, line=dict(color="#d62728", width=2, dash="dash"))
    if marked is not None and 0 <= marked < T:
        fig.add_shape(type="rect", x0=marked - 0.5, x1=marked + 0.5, y0=-0.5, y1=R - 0.5,
                      line=dict(color="black", width=3))
    layout(fig, title, xlabel, ylabel)
    m = fig.layout.margin                         # the plot keeps 48 px a row whatever the slanted labels take
    if flat:                                      # the axis title on lines as wide as the plot, the bar under it
        plot_w = rules.figure_px() - m.l - m.r
        wrapped = rules.wrap(escape(xlabel), plot_w, 14)
        fig.update_xaxes(title_text=wrapped)
        fig.update_layout(margin=dict(b=m.b + 18 * wrapped.count("<br>")))
        colorbar_under(fig, fig.data[0], plot_w, max(48 * R, rules.MIN_PLOT))
        m = fig.layout.margin
    fig.update_layout(height=int(m.t + m.b + max(48 * R, rules.MIN_PLOT)))
    return fig


def score_heatmap(grid, row_names: Sequence[str], col_names: Sequence[str], title: str, xlabel: str, ylabel: str,
                  colorbar: str) -> go.Figure:
    """Patching scores [rows, cols] on the diverging scale centred on 0 (1 = restores A fully). Row and
    column names are plain text (escaped here) and must be unique."""
    fig = values_heatmap(grid, [escape(r) for r in row_names], [escape(c) for c in col_names], title, xlabel,
                         ylabel, colorbar)
    return fig


