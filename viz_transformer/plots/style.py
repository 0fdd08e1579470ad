"""The look every figure shares: colour scales, the palette, escaped text, numpy arrays, and the layout
(title wrapped to the width, axis titles, the white template, margins fitted on the server).

No streamlit import. Every plot module builds on these, so a figure looks the same on every page.
"""
from __future__ import annotations

import html
from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.margins import fit_margins

ATTN_SCALE = "Blues"          # weights in [0, 1]: white = none
VALUE_SCALE = "RdBu_r"        # signed values (q, k, v, scores): blue < 0 < red, centred on 0
MASK_SCALE = [[0.0, "#d9d9d9"], [0.5, "#d9d9d9"], [0.5, "#1f77b4"], [1.0, "#1f77b4"]]
MASKED_BG = "#bdbdbd"         # cells that are -inf (NaN in the figure) show the plot background
BIG_KEYS = 64                 # above this many keys attention is spread thin: scale to the max
PALETTE = ["#2171b5", "#fd8d3c", "#31a354", "#756bb1", "#e6550d", "#636363"]   # series colours in every figure


def escape(s: str) -> str:
    """Text safe for plotly labels/hover: <, > and & become entities (plotly shows them as text)."""
    return html.escape(str(s), quote=False)


def labels(pieces: Sequence[str], start: int = 0) -> list[str]:
    """Escaped axis labels "i:piece" (i counts from `start`): repeated tokens stay distinct."""
    return [escape(f"{i}:{p}") for i, p in enumerate(pieces, start=start)]


def _raw(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def to_numpy(x) -> np.ndarray:
    """Tensor/list -> float32 numpy (plotly ships numpy arrays compactly as typed arrays)."""
    return np.asarray(_raw(x), dtype=np.float32)


_WHITE = pio.templates["plotly_white"]


def _white(fig: go.Figure) -> None:
    """layout.template = plotly_white without validating the template again: validation of the named
    template took ~110 ms a figure, most of a page's time under load. Plotly does the same for its
    default template (BaseFigure._initialize_layout_template)."""
    layout = fig.layout
    layout._validate = False
    try:
        layout.template = _WHITE
    finally:
        layout._validate = fig._validate


def layout(fig: go.Figure, title: str, xlabel: str, ylabel: str, height: Optional[int] = None,
            width: int = rules.FIGURE_PX) -> go.Figure:
    """Title (wrapped to the figure's width), axis titles, the white template and margins fitted to the
    labels (no automargin redraws)."""
    text = rules.wrap(escape(title), width - 20)
    fig.update_layout(title=dict(text=text, x=0.0, xanchor="left", y=1.0, yref="container", yanchor="top",
                                 pad=dict(t=16)),        # at the top: a legend under it keeps its own rows
                      height=height, colorway=PALETTE)
    fig.update_xaxes(title_text=escape(xlabel))
    fig.update_yaxes(title_text=escape(ylabel))
    _white(fig)
    return fit_margins(fig, top=60 + rules.TITLE_LINE_PX * (rules.title_lines(text) - 1), width=width)
