"""Plotly figures for the summaries: rollout and attribution, the attention-sink grid (a statistic per layer × head
is plots.head_grid).

No streamlit import; labels are escaped as in plots.py.
"""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from viz_transformer.plots.heatmaps import attention_heatmap, head_grid


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
