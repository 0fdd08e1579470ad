"""The legibility rules every figure follows, decided once: cell sizes, windows, side by side, titles.

A figure is laid out on the server for the width it will get (`FIGURE_PX`, the page's main column, or a
share of it when figures stand side by side), so the browser never squeezes it:
- a heatmap cell is between MIN_CELL and MAX_CELL px; a matrix whose cells would be smaller shows a window
  of at most `max_cells(width)` rows/columns (the page offers a slider: viz_explorer.kit.widgets.window), never
  smaller cells;
- tick labels are thinned so neighbours stay apart (plot_margins.every_kth), cell numbers are printed only
  when the widest one fits in a cell;
- a colour bar is never longer than its plot; a title wraps instead of running off the figure;
- figures go side by side only while each keeps readable cells (`side_by_side`), else they stack.
The browser test tests/test_browser_legibility.py measures the result in Chromium.
"""
from __future__ import annotations

import contextlib
import html
import math
import re
from contextvars import ContextVar
from typing import Iterator, Optional, Sequence

from viz_transformer.plots.margins import TICK_PX, every_kth, text_px, y_side_px

FIGURE_PX = 900       # a figure's full width in the app: the main column at a 1400 px window, sidebar open
PHONE_PX = 358        # a phone's main column: 390 px less Streamlit's 1rem padding each side
PHONE_PLOT_H = 220    # px: the least plot height of a chart laid out for a phone (style.layout)
TOOLBAR_PX = 28       # px: the bottom of Plotly's toolbar below a chart's top; a phone (no hover) draws it all the time
_SCREEN: ContextVar[int] = ContextVar("figure_px", default=FIGURE_PX)


def figure_px() -> int:
    """The full width figures are laid out for here: FIGURE_PX, or what `screen` set for this page run."""
    return _SCREEN.get()


def narrow() -> bool:
    """Whether figures here are laid out for a column narrower than the desktop's (a phone's): colour bars go under
    their plots, axis titles shorten, labels get measured room."""
    return figure_px() < FIGURE_PX


@contextlib.contextmanager
def screen(width: int) -> Iterator[None]:
    """Figures built inside are laid out for a main column `width` px wide (a phone's: PHONE_PX), so that a
    heatmap shows a narrower window of readable cells instead of being squeezed by the browser."""
    token = _SCREEN.set(int(width))
    try:
        yield
    finally:
        _SCREEN.reset(token)
COLUMN_GAP_PX = 16    # Streamlit's gap between columns
COLORBAR_PX = 95      # a vertical colour bar, its ticks and its title, right of the plot
MIN_CELL = 12         # px: the smallest heatmap cell (a hover target, labels every other one); below it, a window
MAX_CELL = 40         # px: a 3 × 3 matrix does not fill the page
MAX_PLOT_H = 720      # px: the tallest heatmap plot area (a teacher's projector shows ~ 700 px)
MIN_PLOT = 140        # px: the narrowest plot side a figure is laid out with (the browser test allows 110)
SIDE_MIN_CELL = 24    # px: side by side only while every cell stays at least this wide (slanted labels fit)
TITLE_PX = 17         # Plotly's title font size
VALUE_PX = 10         # font size of the numbers printed in cells
TITLE_LINE_PX = 22    # one more title line needs this much more top margin


MOST_ZOOM = 3.0       # a projected figure grows at most this much (a 4 × 4 heatmap's 40 px cells: 120 px)


def zoom(fig_w: float | None, fig_h: float, area_w: float, area_h: float, most: float = MOST_ZOOM) -> float:
    """How much larger a figure laid out fig_w × fig_h px (fig_w None: as wide as the main column, laid out for
    FIGURE_PX) is drawn where a figure may take area_w × area_h px (a projector's main column and screen
    under the header): as much as fits both, at most `most`, never smaller than laid out. Everything in it
    grows alike (style.zoomed), so the rules above hold at any zoom."""
    return max(1.0, min(most, area_w / (fig_w or FIGURE_PX), area_h / max(fig_h, 1.0)))


def colorbar_px(title: str, tick_labels: list[str]) -> float:
    """Width of a vertical colour bar: bar, padding, its tick labels, or its title above it if wider."""
    ticks = max((text_px(s) for s in tick_labels), default=text_px("-0.5"))
    return max(14 + 10 + 5 + ticks + 8, text_px(title)) + 12


def max_cells(width: Optional[int] = None, label_px: float = 150.0) -> int:
    """The most rows/columns a heatmap of this figure width shows at MIN_CELL (the rest goes in a window)."""
    width = width or figure_px()
    return max(1, int((width - label_px - COLORBAR_PX - 20) // MIN_CELL))


def cell_px(rows: int, cols: int, plot_w: float, square: bool = True) -> tuple[float, float]:
    """(cell width, cell height) in px for a rows × cols matrix on a plot plot_w px wide: square cells up to
    MAX_CELL, no taller than MAX_PLOT_H allows; never below MIN_CELL (the caller windows larger matrices)."""
    w = min(MAX_CELL, plot_w / max(cols, 1))
    h = min(MAX_CELL, MAX_PLOT_H / max(rows, 1))
    if square:
        w = h = min(w, h)
    return max(MIN_CELL, w), max(MIN_CELL, h)


def column_px(n: int, width: Optional[int] = None) -> int:
    """The width of each of n equal columns."""
    width = width or figure_px()
    return int((width - COLUMN_GAP_PX * (n - 1)) / n)


def side_by_side(n: int, rows: int, cols: int, label_px: float = 150.0, width: Optional[int] = None,
                 labels: Sequence[str] = (), colorbars: Sequence[str] = ()) -> int:
    """The width each of n heatmaps of rows × cols gets: width / n when their cells stay SIDE_MIN_CELL px
    wide and their plots MIN_PLOT px, else the full width (the page stacks them). Beside the plot: label_px
    of row labels, or, given the labels (escaped, as drawn), the margin they and the y title take with 20 px of
    padding; COLORBAR_PX of colour bar, or, given their titles, the widest bar as the heatmap lays it out (step
    by step at 1366 px: "4:▁an → ▁engineer" and "attention weight" had left a 109 px plot)."""
    width = width or figure_px()
    share = column_px(n, width)
    if labels:
        label_px = y_side_px(list(labels), titled=True) + 20
    bar_px = max((colorbar_px(c, []) for c in colorbars), default=COLORBAR_PX)
    plot_w = share - label_px - bar_px - 20
    w, _ = cell_px(rows, cols, plot_w)
    fits = plot_w / max(cols, 1) >= SIDE_MIN_CELL and min(w * cols, w * rows) >= MIN_PLOT
    return int(share) if n > 1 and fits else width


def values_fit(cell_w: float, cell_h: float, texts: list[str]) -> bool:
    """Whether numbers printed in the cells fit: the widest one inside a cell, one text line high."""
    widest = max((text_px(s, VALUE_PX) for s in texts), default=0.0)
    return cell_w >= widest + 4 and cell_h >= VALUE_PX + 4


def fit_text(s: str, width_px: float, size: int = VALUE_PX) -> str:
    """s cut (with "…") to fit width_px at this font size, or "" if not even one character and "…" fit."""
    if text_px(s, size) <= width_px:
        return s
    for n in range(len(s) - 1, 0, -1):
        if text_px(s[:n] + "…", size) <= width_px:
            return s[:n] + "…"
    return ""


def fit_label(label: str, room_px: float) -> str:
    """An axis label in room_px: whole when it fits, else without what its parentheses add ("query (attending)" ->
    "query", "查询（发出注意的词元）" -> "查询"): a phone's narrow figure."""
    if text_px(label) <= room_px:
        return label
    return re.split(r" ?[(（]", label)[0] or label


def wrap(text: str, width_px: float, size: int = TITLE_PX) -> str:
    """Break a title into lines (<br>) at spaces so none is wider than width_px; a word longer than a line
    (a capture name, CJK text) is cut between characters."""
    if text_px(text, size) <= width_px:
        return text
    lines, line = [], ""
    for word in re.split(r"(?<= )", text):
        while text_px(line + word, size) > width_px:
            if line:
                lines.append(line.rstrip())
                line = ""
                continue
            cut = 1                       # one word alone is too wide: cut it where it stops fitting
            while cut < len(word) and text_px(word[:cut + 1], size) <= width_px:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        line += word
    if line.strip():
        lines.append(line.rstrip())
    return "<br>".join(lines)


def title_lines(text: str) -> int:
    return text.count("<br>") + 1


MIN_SLANT_GAP = TICK_PX + 3  # px across the slant between neighbouring 45° labels


def thin_axis(axis, cats: list[str], cell: float, gap: float) -> None:
    """Label every k-th category when cells are too small for all (hover still names every cell)."""
    shown = every_kth(cats, cell, gap)
    if shown is not None:
        axis.update(tickmode="array", tickvals=shown)


def category_ticks(axis, cats: list[str], cell: float) -> None:
    """Flat labels while they fit under their category, else slanted at 45° and every k-th one."""
    if max(map(text_px, cats), default=0) + 6 <= cell:
        axis.update(tickangle=0)
    else:
        axis.update(tickangle=-45)
        thin_axis(axis, cats, cell, MIN_SLANT_GAP / math.sin(math.radians(45)))


# -- a phone: no hover names a cell, so the figure itself must --------------------------------------------------
ROW_SHARE = 0.25      # the most of a phone's figure width its row labels take (the plot keeps the rest)
TWO_LINES_PX = 36     # a row this tall holds a label on two lines of TICK_PX text, a gap between labels
ALL_KEYS = 24         # a phone names every key of a heatmap with at most this many (past it: every k-th, as before)
KEY_PX = 80           # the longest key label on a phone, turned 90° under its column ("…" past it)
SMALL_GRID = 12       # a phone writes each cell's value in it up to this many rows and keys (beyond: a tap shows it)


def _fit(label: str, room: float, size: int = TICK_PX) -> str:
    """An escaped label cut to room px (fit_text on its text, so an entity is never cut in two)."""
    return html.escape(fit_text(html.unescape(label), room, size), quote=False)


def row_texts(rows: list[str], room: float, two_lines: bool) -> list[str]:
    """A phone's row labels in room px each: whole when they fit; else, with two_lines, broken at the last space
    that leaves a first line that fits ("4:▁an →<br>▁engineer", the second line cut with "…" if need be); else cut
    with "…". Hover (a tap) still shows the whole label."""
    out = []
    for s in rows:
        plain = html.unescape(s)
        if text_px(plain) <= room:
            out.append(s)
            continue
        cuts = [i for i, ch in enumerate(plain) if ch == " " and text_px(plain[:i]) <= room] if two_lines else []
        if cuts:
            head, tail = plain[:cuts[-1]], plain[cuts[-1] + 1:]
            out.append(html.escape(head, quote=False) + "<br>" + _fit(html.escape(tail, quote=False), room))
        else:
            out.append(_fit(s, room))
    return out


def name_every_key(axis, cats: list[str], cell: float) -> None:
    """A phone's key axis, up to ALL_KEYS keys: every key named under its column (tickvals/ticktext, so Plotly skips
    none), flat while the labels fit in a column, else turned 90° with a font no larger than the column is wide
    (neighbours stay apart), each at most KEY_PX long."""
    size = int(min(TICK_PX, max(8, cell - 3)))
    texts = [_fit(c, KEY_PX, size) for c in cats]
    flat = max((text_px(t, size) for t in texts), default=0) + 6 <= cell
    axis.update(tickmode="array", tickvals=list(cats), ticktext=texts, tickangle=0 if flat else -90,
                tickfont=dict(size=size))


def short_value(v: float) -> str:
    """A cell's value in 2 decimals without the leading zero (".62", "-.05"; "1" and "-1" for ±1.00): a phone's
    narrower cells."""
    s = f"{v:.2f}"
    if s in ("1.00", "-1.00"):
        return s[:-3]
    return s.replace("0.", ".", 1) if s.lstrip("-").startswith("0.") else s
