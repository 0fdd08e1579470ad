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
from viz_transformer.plots.props import put

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


def as_array(x) -> np.ndarray:
    """A tensor (any device) or a list as a numpy array, its dtype kept."""
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def to_numpy(x) -> np.ndarray:
    """Tensor/list -> float32 numpy (plotly ships numpy arrays compactly as typed arrays)."""
    return np.asarray(as_array(x), dtype=np.float32)


_WHITE = pio.templates["plotly_white"]


def white(fig: go.Figure) -> None:
    """layout.template = plotly_white without validating the template again: the named template is
    validated already, and validating it again for every figure cost more than building the figure. Plotly does the same for its
    default template (BaseFigure._initialize_layout_template)."""
    layout = fig.layout
    layout._validate = False
    try:
        layout.template = _WHITE
    finally:
        layout._validate = fig._validate


def layout(fig: go.Figure, title: str, xlabel: str, ylabel: str, height: Optional[int] = None,
            width: Optional[int] = None) -> go.Figure:
    """Title (wrapped to the figure's width), axis titles, the white template and margins fitted to the
    labels (no automargin redraws)."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    text = rules.wrap(escape(title), width - 20)
    put(fig.layout, title=dict(text=text, x=0.0, xanchor="left", y=1.0, yref="container", yanchor="top",
                               pad=dict(t=title_pad())),         # at the top: a legend under it keeps its own rows
        height=height, colorway=PALETTE)
    for axes, label in ((fig.select_xaxes(), xlabel), (fig.select_yaxes(), ylabel)):
        for ax in axes:                                  # every subplot's, as update_xaxes(title_text=...)
            put(ax, title=dict(text=escape(label)))
    white(fig)
    fit_margins(fig, top=title_top(text), width=width)
    if height is not None and rules.narrow():   # a phone: a title and legend on more lines, and
        m = fig.layout.margin                                       # slanted labels, must not eat the plot
        fig.layout.height = max(height, int(m.t + m.b + rules.PHONE_PLOT_H))
    return fig


def title_pad() -> int:
    """The title's pad.t: 16, or on a phone (figure_rules.narrow()), whose touch screen (no hover) shows Plotly's
    toolbar all the time over the top right where a wrapped title runs, 20 px more than the toolbar's bottom (the
    title's box starts pad.t − 16 px below the chart's top, as drawn)."""
    return rules.TOOLBAR_PX + 20 if rules.narrow() else 16


def title_top(text: str) -> int:
    """The top margin for a title `text` (wrapped with <br>): the title's pad, its lines, room under it."""
    return 60 + title_pad() - 16 + rules.TITLE_LINE_PX * (rules.title_lines(text) - 1)


def colorbar_under(fig: go.Figure, trace, plot_w: float, plot_h: float) -> None:
    """A phone's colour bar (figure_rules.narrow()): horizontal, as wide as the plot, under it and
    its axis labels, so the plot keeps the width a bar beside it would take. Call after `layout` (its margins)."""
    m = fig.layout.margin
    put(trace, colorbar=dict(orientation="h", lenmode="pixels", len=max(60, plot_w), thickness=14, x=0, xanchor="left",
                             y=-(m.b + 6) / max(plot_h, 1), yanchor="top", title=dict(side="top")))
    put(fig.layout, margin=dict(b=m.b + 66))


# -- a figure drawn larger (presenter mode) ---------------------------------------------------------------
_PLOTLY_PX = {"font.size": 12, "height": 450, "hoverlabel.font.size": 13,       # plotly.js's defaults, written out
              "margin": dict(l=80, r=80, t=100, b=80),                          # so that they grow too
              "colorbar": dict(thickness=30, xpad=10, ypad=10)}
_PX_KEYS = {"standoff", "thickness", "ticklen", "tickwidth", "borderwidth", "xpad", "ypad", "tracegroupgap",
            "arrowwidth", "xshift", "yshift", "outlinewidth", "xgap", "ygap"}                   # px wherever they stand
_PX_IN = {"margin": {"l", "r", "t", "b", "pad"}, "pad": {"l", "r", "t", "b"}, "line": {"width"},
          "marker": {"size"}}                                                   # px inside these dicts only


def _grow(d, k: float, parent: str = "") -> None:
    """Every pixel size in a figure's dict (layout and traces, the template's defaults too) times k."""
    if isinstance(d, list):
        for v in d:
            _grow(v, k, parent)
        return
    if not isinstance(d, dict):
        return
    for key, v in d.items():
        px = (key in _PX_KEYS or key in _PX_IN.get(parent, ()) or (key == "size" and parent.endswith("font"))
              or (key == "len" and d.get("lenmode") == "pixels"))
        if px and isinstance(v, (int, float)) and not isinstance(v, bool):
            d[key] = v * k
        elif px and isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
            d[key] = [x * k for x in v]                                        # marker sizes, one a point
        else:
            _grow(v, k, key)


def zoomed(fig: go.Figure, k: float) -> go.Figure:
    """The same figure k times larger: its size, margins, fonts, colour bar, lines and markers, so everything
    the legibility rules (figure_rules) decided for it keeps its proportions: cells k times larger, labels
    k times larger and as far apart as before. A figure without a width stays as wide as its column. k = 1:
    the figure itself."""
    if k == 1:
        return fig
    d = fig.to_dict()
    lay = d.setdefault("layout", {})
    lay.setdefault("font", {}).setdefault("size", _PLOTLY_PX["font.size"])
    lay.setdefault("hoverlabel", {}).setdefault("font", {}).setdefault("size", _PLOTLY_PX["hoverlabel.font.size"])
    lay["margin"] = {**_PLOTLY_PX["margin"], **lay.get("margin", {})}
    lay.setdefault("height", _PLOTLY_PX["height"])
    for tr in d.get("data", []):
        if "colorbar" in tr:
            tr["colorbar"] = {**_PLOTLY_PX["colorbar"], **tr["colorbar"]}
    _grow(d, k)
    for key in ("width", "height"):
        if lay.get(key):
            lay[key] = int(round(lay[key] * k))
    for ann in lay.get("annotations", []):             # an arrow's tail given in px from its head
        for a, ref in (("ax", "axref"), ("ay", "ayref")):
            if isinstance(ann.get(a), (int, float)) and ann.get(ref, "pixel") == "pixel":
                ann[a] *= k
    return go.Figure(d)
