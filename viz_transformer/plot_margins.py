"""Margins and tick labels decided on the server, so the browser draws each figure once.

plotly_white turns `automargin` on for every axis: Plotly then draws a figure, measures its tick labels and
titles, widens the margins and draws it again, several times over when the cells are kept square ("Too
many auto-margin redraws"): at 512 tokens that was 2.4 s of one heatmap's 2.4 s in Chromium, 0.36 s
without it (benchmarks/pixels.py). Here the margins are estimated once from the labels' text, and an axis
with more categories than can be read gets every k-th label only (hover still names every cell).
"""
from __future__ import annotations

import html
import math
import re
import unicodedata

import plotly.graph_objects as go

TICK_PX = 12          # Plotly's default tick-label font size
TITLE_PX = 30         # an axis title: 14 px text + the template's 15 px standoff
NUMBER = "-0.000"     # a typical automatic tick label on a numeric axis
WIDE_PLOT_PX = 900    # a figure's plot width in the app (it stretches to the page's width)
MIN_LABEL_GAP = 15    # px between neighbouring tick labels for them to stay readable


def text_px(s: str, size: int = TICK_PX) -> float:
    """Rough rendered width of a label: full-width (CJK) characters one em, the others 0.62 em."""
    s = html.unescape(re.sub(r"<[^>]*>", "", str(s)))
    return sum(size if unicodedata.east_asian_width(ch) in "WF" else 0.62 * size for ch in s)


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


def _x_height(ax, labels: list[str]) -> float:
    widest = max(map(text_px, labels))
    angle = ax.tickangle
    if angle is None or angle == "auto":        # Plotly turns crowded labels by 90°
        angle = 90 if sum(text_px(t) + 8 for t in labels) > WIDE_PLOT_PX else 0
    a = math.radians(float(angle))
    return widest * abs(math.sin(a)) + TICK_PX * abs(math.cos(a)) + 8


def fit_margins(fig: go.Figure, top: int = 60, pad: int = 10) -> go.Figure:
    """Turn automargin off on every axis and set margins that hold its tick labels and title."""
    side = {"l": 0.0, "r": 0.0, "b": 0.0, "t": 0.0}
    for ax in list(fig.select_xaxes()) + list(fig.select_yaxes()):
        name = ax.plotly_name
        labels = _labels(fig, ax, name)
        title = TITLE_PX if ax.title and ax.title.text else 0
        if name.startswith("y"):
            need = (max(map(text_px, labels)) + 8 if labels else 0) + title
            where = "r" if ax.side == "right" else "l"
        else:
            need = (_x_height(ax, labels) if labels else 0) + title
            where = "t" if ax.side == "top" else "b"
        side[where] = max(side[where], need)
        ax.automargin = False
    fig.update_layout(margin=dict(l=int(pad + side["l"]), r=int(pad + side["r"]), b=int(pad + side["b"]),
                                  t=int(top + side["t"])))
    return fig
