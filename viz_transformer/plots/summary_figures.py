"""Plotly figures for the summaries: rollout and attribution, the attention-sink grid (a statistic per layer × head
is plots.head_grid).

No streamlit import; labels are escaped as in plots.py.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.heatmaps import attention_heatmap, head_grid
from viz_transformer.plots.style import escape, layout


def relevance_heatmap(matrix, q_pieces: Sequence[str], k_pieces: Sequence[str], title: str,
                      xlabel: str, ylabel: str, colorbar: str = "relevance") -> go.Figure:
    """A rollout or attribution matrix [q, k] (rows sum to 1), drawn like an attention pattern."""
    return attention_heatmap(matrix, q_pieces, k_pieces, title, xlabel, ylabel, colorbar=colorbar)



def sink_grid(shares, title: str, layer_label: str = "layer", head_label: str = "head",
              colorbar: str = "share on position 0", hover: str = "click") -> go.Figure:
    """The layer × head grid of each head's share of attention on the first position (analysis.sinks,
    [layer, head] in 0..1): one fixed 0..1 scale, so grids of different blocks and texts compare, each cell
    printed as a percentage; clickable as every head_grid."""
    fig = head_grid(shares, title, layer_label, head_label, colorbar, hover=hover, limit=1.0, signed=False,
                    fmt=".0%")
    # labels under their ticks: a grid of few layers has a short colour bar, whose "100%" at the very top ran
    # into the bar's title (seen on stories-llama-hf, 4 layers)
    fig.update_traces(colorbar=dict(tickformat=".0%", ticklabelposition="outside bottom"), selector=dict(type="heatmap"))
    return fig


ROLE_ORDER = ("", "previous-token", "first-token sink", "self", "end-token sink", "broad")   # "" = none clear
ROLE_COLOURS = ("#f0f0f0", "#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc", "#fff3a8")           # light: black text reads


ROLE_NUMBER_COLUMNS = 24     # "0.94" at 10 px needs ~28 px: 24 columns fit a ~700 px plot, the narrowest page column


def printed_every(n_steps: int) -> int:
    """How many columns apart the roles chart prints its evidence numbers: 1 up to ROLE_NUMBER_COLUMNS steps (on a
    phone's narrower figure, as many fewer as its plot is narrower: figure_rules.figure_px)."""
    room = max(1, int(ROLE_NUMBER_COLUMNS * (rules.figure_px() - 200) / (rules.FIGURE_PX - 200)))
    return max(1, -(-n_steps // room))


def roles_over_training(table, block: str, role_labels: dict, title: str, xlabel: str, ylabel: str,
                        current: Optional[int] = None, hover: str = "evidence") -> go.Figure:
    """Each head of `block` (rows "L0 H3") at every recorded step (columns): its role as a colour, the
    evidence number printed in the cell (the role's statistic; for "none clear" the largest one, for
    "broad" the entropy). table: analysis.summaries.roles_over_training; role_labels: role -> shown name
    (every entry of ROLE_ORDER); current: the step index framed. A long run records more steps than a
    chart has room to print numbers for: then every `printed_every`-th column, ending at the last, carries
    its numbers, and every cell still has them in its hover."""
    t = table[table.block == block].sort_values(["layer", "head", "step_index"])
    heads = list(dict.fromkeys(zip(t["layer"], t["head"])))
    steps = sorted(dict.fromkeys(zip(t["step_index"], t["step"])))
    codes = {r: i for i, r in enumerate(ROLE_ORDER)}
    z = np.full((len(heads), len(steps)), np.nan)
    text = np.full(z.shape, "", dtype=object)
    hovers = np.full(z.shape, "", dtype=object)
    row_of = {h: i for i, h in enumerate(heads)}
    every = printed_every(len(steps))
    for r in t.itertuples(index=False):
        i, j = row_of[(r.layer, r.head)], r.step_index
        z[i, j] = codes.get(r.role, 0)
        if (len(steps) - 1 - j) % every == 0:
            text[i, j] = f"{r.evidence_value:.2f}"
        hovers[i, j] = escape(f"L{r.layer} H{r.head}, step {r.step}: {role_labels.get(r.role, r.role)} "
                              f"({r.evidence})")
    n = len(ROLE_ORDER)
    scale = [x for i, c in enumerate(ROLE_COLOURS) for x in ([i / n, c], [(i + 1) / n, c])]
    fig = go.Figure(go.Heatmap(
        z=z, x=[str(s) for _, s in steps], y=[f"L{ly} H{h}" for ly, h in heads], zmin=-0.5, zmax=n - 0.5,
        colorscale=scale, text=text, texttemplate="%{text}", textfont=dict(size=10, color="black"),
        customdata=hovers, hovertemplate=f"%{{customdata}}<br>{escape(hover)}<extra></extra>", xgap=1, ygap=1,
        colorbar=dict(tickvals=list(range(n)), ticktext=[escape(role_labels.get(r, r)) for r in ROLE_ORDER],
                      title=dict(text=""), thickness=14)))
    if current is not None:
        fig.add_shape(type="rect", x0=current - 0.5, x1=current + 0.5, y0=-0.5, y1=len(heads) - 0.5,
                      line=dict(color="#d62728", width=3))
    pad = (every - 1) / 2          # a number wider than its column still fits inside the plot at both ends
    fig.update_xaxes(type="category", showgrid=False, tickangle=-45, range=[-0.5 - pad, len(steps) - 0.5 + pad])
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    fig.update_layout(plot_bgcolor="white", dragmode=False)
    return layout(fig, title, xlabel, ylabel, height=max(260, 140 + 20 * len(heads)))
