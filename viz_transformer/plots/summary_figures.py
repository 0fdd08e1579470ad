"""Plotly figures for the summaries: rollout and attribution (a statistic per layer × head is plots.head_grid).

No streamlit import; labels are escaped as in plots.py.
"""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from viz_transformer.plots.heatmaps import attention_heatmap


def relevance_heatmap(matrix, q_pieces: Sequence[str], k_pieces: Sequence[str], title: str,
                      xlabel: str, ylabel: str, colorbar: str = "relevance") -> go.Figure:
    """A rollout or attribution matrix [q, k] (rows sum to 1), drawn like an attention pattern."""
    return attention_heatmap(matrix, q_pieces, k_pieces, title, xlabel, ylabel, colorbar=colorbar)

