"""Margins and tick labels decided on the server, so the browser draws each figure once.

plotly_white turns `automargin` on for every axis: Plotly then draws a figure, measures its tick labels and
titles, widens the margins and draws it again, several times over when the cells are kept square ("Too
many auto-margin redraws"), which at hundreds of tokens is most of a heatmap's drawing time in the browser
(benchmarks/pixels.py measures it). Here the margins are estimated once from the labels' text, and an axis
with more categories than can be read gets every k-th label only (hover still names every cell).
"""
from __future__ import annotations

import html
import math
import re
import unicodedata

import plotly.graph_objects as go

from viz_transformer.plots.props import put

TICK_PX = 12          # Plotly's default tick-label font size
TITLE_PX = 30         # an axis title: 14 px text + the template's 15 px standoff
NUMBER = "-0.000"     # a typical automatic tick label on a numeric axis
WIDE_PLOT_PX = 900    # a figure's plot width in the app (it stretches to the page's width)
MIN_LABEL_GAP = 15    # px between neighbouring tick labels for them to stay readable


def text_px(s: str, size: int = TICK_PX) -> float:
    """Rough rendered width of a label: full-width (CJK) and ambiguous-width (→ ▁ …) characters one em, the others 0.62 em."""
    s = html.unescape(re.sub(r"<[^>]*>", "", str(s)))
    return sum(size if unicodedata.east_asian_width(ch) in "WFA" else 0.62 * size for ch in s)   # A: →, ▁, …


def every_kth(categories: list[str], cell_px: float, gap_px: float = MIN_LABEL_GAP) -> list[str] | None:
    """The categories to label when each takes cell_px: every k-th so labels stay gap_px apart, or None
    (label them all)."""
    step = math.ceil(gap_px / max(cell_px, 1e-6))
    return categories[::step] if step > 1 else None


def _labels(fig: go.Figure, ax, name: str) -> list[str]:
    """The tick labels an axis will show (at most: Plotly may thin automatic ones)."""
    if ax.showticklabels is False or ax.visible is False:
        return []
    if ax.ticktext is not None:
        return [str(t) for t in ax.ticktext]
    if ax.tickvals is not None and (ax.type == "category" or any(isinstance(v, str) for v in ax.tickvals)):
        return [str(v) for v in ax.tickvals]
    letter, ref = name[0], name[0] + name[5:]                        # "xaxis2" -> "x2"
    cats: dict[str, None] = {}
    for tr in fig.data:
        if (getattr(tr, letter + "axis", None) or letter) == ref:
            vals = getattr(tr, letter, None)
            if vals is not None and len(vals) and isinstance(vals[0], str):
                cats.update(dict.fromkeys(vals))
    if cats:
        return list(cats)
    return [NUMBER] if ax.tickvals is None else [f"{v:g}" if isinstance(v, float) else str(v) for v in ax.tickvals]


def auto_angle(labels: list[str]) -> int:
    """The angle Plotly's automatic tick angles (0, 30 or 90°) turn these labels by on a WIDE_PLOT_PX axis:
    flat while they fit side by side, 30° while neighbours stay a text height apart across the slant."""
    if sum(text_px(t) + 8 for t in labels) <= WIDE_PLOT_PX:
        return 0
    spacing = WIDE_PLOT_PX / max(len(labels), 1)
    return 30 if spacing * math.sin(math.radians(30)) >= TICK_PX + 2 else 90


def _x_height(ax, labels: list[str]) -> float:
    """The height the x tick labels take; an automatic angle is decided here and written into the axis, so
    Plotly draws the labels at the angle their margin was made for."""
    angle = ax.tickangle
    if angle is None or angle == "auto":
        angle = auto_angle(labels)
        if angle:
            ax.tickangle = angle
    a = math.radians(float(angle))
    return max(map(text_px, labels)) * abs(math.sin(a)) + TICK_PX * abs(math.cos(a)) + 8


def _slant_overhang(ax, labels: list[str]) -> float:
    """How far the last label of a slanted x axis runs past the plot's right edge: it starts at its tick,
    half a category in from the edge, and runs down to the right."""
    angle = ax.tickangle if isinstance(ax.tickangle, (int, float)) else 0
    if not labels or not 0 < angle < 90:
        return 0.0
    return max(0.0, text_px(labels[-1]) * math.cos(math.radians(angle)) - WIDE_PLOT_PX / (2 * len(labels)))


LEGEND_ROW_PX = 24    # one row of a horizontal legend
LEGEND_ITEM_PX = 40   # a legend entry's symbol and gaps, besides its text


def _legend_above(fig: go.Figure, width: float = WIDE_PLOT_PX) -> float:
    """Height of a horizontal legend drawn above the plot (y >= 1), which sits in the top margin under
    the title: its entries wrap into rows of WIDE_PLOT_PX."""
    legend = fig.layout.legend
    if fig.layout.showlegend is False or legend.orientation != "h" or (legend.y if legend.y is not None else 0) < 1:
        return 0.0
    names = [tr.name for tr in fig.data if tr.showlegend is not False and tr.name]
    if not names or (len(names) == 1 and fig.layout.showlegend is None):    # Plotly hides a one-trace legend
        return 0.0
    entries = sum(text_px(n) + LEGEND_ITEM_PX for n in dict.fromkeys(names))
    return LEGEND_ROW_PX * math.ceil(entries / max(width - 40, 100))


def y_side_px(labels: list[str], titled: bool) -> float:
    """The margin a y axis's tick labels (and its title, when titled) take beside the plot, padding aside: a label
    on two lines ("a<br>b") takes its wider line's."""
    widest = max((text_px(line) for s in labels for line in str(s).split("<br>")), default=None)
    return (widest + 8 if widest is not None else 0) + (TITLE_PX if titled else 0)


def fit_margins(fig: go.Figure, top: int = 60, pad: int = 10, width: float = WIDE_PLOT_PX) -> go.Figure:
    """Turn automargin off on every axis and set margins that hold its tick labels and title, and a
    horizontal legend above the plot under the figure's title."""
    side = {"l": 0.0, "r": 0.0, "b": 0.0, "t": 0.0}
    for ax in list(fig.select_xaxes()) + list(fig.select_yaxes()):
        name = ax.plotly_name
        labels = _labels(fig, ax, name)
        title = TITLE_PX if ax.title and ax.title.text else 0
        if name.startswith("y"):
            need = y_side_px(labels, bool(title))
            where = "r" if ax.side == "right" else "l"
        else:
            need = (_x_height(ax, labels) if labels else 0) + title
            where = "t" if ax.side == "top" else "b"
            side["r"] = max(side["r"], _slant_overhang(ax, labels))
        side[where] = max(side[where], need)
        ax.automargin = False
    put(fig.layout, margin=dict(l=int(pad + side["l"]), r=int(pad + side["r"]), b=int(pad + side["b"]),
                                t=int(top + side["t"] + _legend_above(fig, width))))
    return fig
