"""Plotly heatmaps for attention, masks, positional encodings and decoding, the model view and the line view:
pure functions (line and bar charts are in charts.py).

No streamlit import: every function returns a go.Figure, usable in a notebook (`fig.show()`).
Token labels are escaped here (plotly renders some HTML tags inside text).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.margins import every_kth, text_px, y_side_px
from viz_transformer.plots.props import put
from viz_transformer.plots.style import (ATTN_SCALE, BIG_KEYS, MASK_SCALE, MASKED_BG, VALUE_SCALE, as_array,
                                         colorbar_under, escape, labels, layout, to_numpy)

def heatmap(z, row_labels: Sequence[str], col_labels: Sequence[str], title: str, xlabel: str, ylabel: str,
            colorbar: str = "weight", colorscale=ATTN_SCALE, zmin=None, zmax=None, zmid=None,
            show_values: Optional[bool] = None, hover: str = "weight", width: Optional[int] = None,
            colorbar_ticks: Optional[Sequence[str]] = None,
            colorbar_tickvals: Optional[Sequence[float]] = None) -> go.Figure:
    """A labelled matrix, rows top to bottom, columns left to right, laid out for a figure `width` px wide
    by the rules of figure_rules: square cells (a long thin matrix such as [tokens × d_head] fills the
    width instead) of MIN_CELL..MAX_CELL px, the height following from them; labels thinned or slanted so
    they never collide; numbers in cells only when the widest fits. A matrix with more rows or columns than
    fit at MIN_CELL shows its first window (drag to pan); the app windows it before (widgets.window). Labels
    must already be escaped and unique (see `labels`). NaN cells (e.g. -inf scores) show the grey background."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    z = as_array(z)
    if z.dtype.kind in "bu":                    # a mask: sent as 1 byte a cell, 4× fewer than float32
        z = z.astype(np.uint8)
    else:
        z = z.astype(np.float32)
        z = np.where(np.isfinite(z), z, np.nan)
    rows, cols = list(row_labels), list(col_labels)
    n_rows, n_cols = z.shape
    ticks = colorbar_ticks if colorbar_ticks is not None else [format(v, "g") for v in (zmin, zmax) if v is not None]
    flat = rules.narrow()        # a phone: the colour bar under the plot, not beside it
    bar_w = 0 if flat else rules.colorbar_px(colorbar, [str(s) for s in ticks])
    # a phone: row labels in at most ROW_SHARE of the width (on two lines, or cut), so the plot keeps the rest
    row_text = rules.row_texts(rows, rules.ROW_SHARE * width, two_lines=True) if flat else rows
    label_w = y_side_px(row_text, titled=True) + 10                # y tick labels, the axis title, the padding
    plot_w = width - label_w - bar_w - 30
    fit = min(rules.max_cells(width), int(plot_w // rules.MIN_CELL))  # shown at once (a pan shows the rest)
    R, C = min(n_rows, rules.max_cells(width), int(rules.MAX_PLOT_H // rules.MIN_CELL)), min(n_cols, max(fit, 1))
    square = max(R, C) <= 3 * min(R, C)
    cw, ch = rules.cell_px(R, C, plot_w, square)
    if not square:                                                   # fill the width, rows as tall as allowed
        cw = max(rules.MIN_CELL, min(plot_w / C, 4 * rules.MAX_CELL))
    if square:                                                       # never a plot side under MIN_PLOT
        cw = ch = max(cw, rules.MIN_PLOT / max(R, C))
    else:
        cw, ch = max(cw, rules.MIN_PLOT / C), max(ch, rules.MIN_PLOT / R)
    if flat and square and min(R * ch, C * cw) < rules.MIN_PLOT:   # a phone: a few rows' (columns') cells taller
        square = False
        cw, ch = max(cw, rules.MIN_PLOT / C), max(ch, rules.MIN_PLOT / R)
    two = any("<br>" in r for r in row_text)
    if two and R * rules.TWO_LINES_PX <= rules.MAX_PLOT_H:          # a phone: rows tall enough for two lines
        if square:
            cw = ch = max(ch, min(rules.TWO_LINES_PX, plot_w / C))
        square, ch = square and ch >= rules.TWO_LINES_PX, max(ch, rules.TWO_LINES_PX)
    elif two:                                                        # too many rows: one line each, cut
        row_text, two = rules.row_texts(rows, rules.ROW_SHARE * width, two_lines=False), False
    if flat:                                                         # a phone: axis titles no longer than their side
        xlabel, ylabel = rules.fit_label(xlabel, label_w + cw * C), rules.fit_label(ylabel, ch * R)
    bar = dict(title=dict(text=escape(colorbar)), lenmode="pixels", len=max(60, 0.9 * ch * R - 20), thickness=14)
    if colorbar_ticks is not None:
        bar.update(tickvals=colorbar_tickvals, ticktext=[escape(s) for s in colorbar_ticks])
    tr = go.Heatmap(z=z, x=cols, y=rows, colorscale=colorscale, zmin=zmin, zmax=zmax, zmid=zmid, xgap=0, ygap=0,
                    colorbar=bar, hovertemplate=f"{escape(ylabel)}: %{{y}}<br>{escape(xlabel)}: %{{x}}<br>"
                                                f"{escape(hover)}: %{{z:.4f}}<extra></extra>")
    if show_values is not False and n_rows * n_cols <= 400 and z.dtype.kind == "f":
        shown = [f"{v:.2f}" for v in z[np.isfinite(z)]]
        if show_values or rules.values_fit(cw, ch, shown):
            tr.update(texttemplate="%{z:.2f}", textfont=dict(size=rules.VALUE_PX))
        elif flat and max(R, C) <= rules.SMALL_GRID:                # a phone has no hover: the value in its cell
            short = [[rules.short_value(v) if np.isfinite(v) else "" for v in row] for row in z]
            if rules.values_fit(cw, ch, [v for row in short for v in row]):
                tr.update(text=short, texttemplate="%{text}", textfont=dict(size=rules.VALUE_PX))
    fig = go.Figure(tr)
    # the axes on the cells, row 0 on top (the first window of a larger matrix, dragged to move it): a trace or
    # frame drawn over the cells (a mark in the first column) would otherwise widen the autorange, a blank band
    xaxis, yaxis, more = dict(type="category", range=[-0.5, C - 0.5]), \
        dict(type="category", range=[R - 0.5, -0.5], autorange=False), {}
    if square:
        yaxis.update(scaleanchor="x", scaleratio=1, constrain="domain")
        xaxis.update(constrain="domain", constraintoward="left")
    if (R, C) != (n_rows, n_cols):        # too large for readable cells: a pan shows the rest
        more["dragmode"] = "pan"
    put(fig.layout, xaxis=xaxis, yaxis=yaxis, plot_bgcolor=MASKED_BG, **more)
    if row_text is rows:
        rules.thin_axis(fig.layout.yaxis, rows, ch, 14)
    else:                                                            # a phone's shortened labels, every k-th row
        named = dict(zip(rows, row_text))
        every = every_kth(rows, ch, rules.TWO_LINES_PX if two else 14) or rows
        put(fig.layout.yaxis, tickmode="array", tickvals=every, ticktext=[named[r] for r in every])
    if flat and C <= rules.ALL_KEYS:                                 # a phone has no hover: every key named
        rules.name_every_key(fig.layout.xaxis, cols, cw)
    else:
        rules.category_ticks(fig.layout.xaxis, cols, cw)
    need = max(label_w + cw * C + bar_w + 30, text_px(escape(title), rules.TITLE_PX) + 30)   # cells, or a 1-line title
    fig_w = width if not square else min(width, int(need))
    layout(fig, title, xlabel, ylabel, width=fig_w)
    if flat:
        colorbar_under(fig, fig.data[0], cw * C, ch * R)
    m = fig.layout.margin
    put(fig.layout, height=int(m.t + m.b + ch * R), width=fig_w if fig_w < width else None)
    return fig


def attention_heatmap(pattern, q_pieces: Sequence[str], k_pieces: Sequence[str], title: str,
                      xlabel: str = "key (attended to)", ylabel: str = "query (attending)",
                      colorbar: str = "attention weight", q_start: int = 0, k_start: int = 0,
                      zmax: Optional[float] = None, width: Optional[int] = None) -> go.Figure:
    """One [q, k] attention pattern with token labels on both axes. The scale is 0..1 (comparable
    across heads) unless there are more than BIG_KEYS keys: then weights are ~1/k and the scale
    stops at the largest weight, or nothing would be visible."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    a = to_numpy(pattern)
    if zmax is None:
        zmax = 1.0 if a.shape[-1] <= BIG_KEYS else float(np.nanmax(a)) or 1.0
    return heatmap(a, labels(q_pieces, q_start), labels(k_pieces, k_start), title, xlabel, ylabel,
                   colorbar=colorbar, zmin=0.0, zmax=zmax, hover=colorbar, width=width)


def values_heatmap(m, row_labels: Sequence[str], col_labels: Sequence[str], title: str, xlabel: str,
                   ylabel: str, colorbar: str = "value", width: Optional[int] = None) -> go.Figure:
    """Signed values on a diverging scale centred on 0 (q, k, v, scores). -inf shows as grey."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    a = to_numpy(m)
    finite = a[np.isfinite(a)]
    lim = float(np.abs(finite).max()) if finite.size else 1.0
    return heatmap(a, row_labels, col_labels, title, xlabel, ylabel, colorbar=colorbar, colorscale=VALUE_SCALE,
                   zmin=-lim, zmax=lim, zmid=None, hover=colorbar, width=width)


def mask_heatmap(mask, q_pieces: Sequence[str], k_pieces: Sequence[str], title: str,
                 xlabel: str = "key", ylabel: str = "query", allowed: str = "may attend",
                 blocked: str = "masked (−∞)", colorbar: str = "mask", width: Optional[int] = None,
                 q_start: int = 0, k_start: int = 0) -> go.Figure:
    """A boolean [q, k] mask: blue = may attend, grey = masked; the colour bar names both."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    fig = heatmap(as_array(mask) != 0, labels(q_pieces, q_start), labels(k_pieces, k_start), title, xlabel, ylabel, colorbar=colorbar,
                  colorscale=MASK_SCALE, zmin=0, zmax=1, show_values=False,
                  hover=f"{allowed} (1) / {blocked} (0)", width=width, colorbar_ticks=[blocked, allowed],
                  colorbar_tickvals=[0.25, 0.75])
    return fig


def dims(n: int) -> list[str]:
    return [str(i) for i in range(n)]


# -- many heads at once --------------------------------------------------------------------------
def model_view(tiles, title: str, layer_label: str = "layer", head_label: str = "head",
               selected: Optional[tuple[int, int]] = None, colorbar: str = "max weight in block",
               hover: str = "click to open", width: Optional[int] = None) -> go.Figure:
    """All layers × heads as one tiled heatmap, each tile 36..90 px. tiles: [layer][head] -> 2-D array (already
    downsampled to a common size). One invisible marker sits on every tile centre so that a click
    selects (layer, head): customdata = [layer, head]."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    L, H = len(tiles), len(tiles[0])
    th, tw = max(t.shape[0] for row in tiles for t in row), max(t.shape[1] for row in tiles for t in row)
    gap = max(1, th // 8)
    canvas = np.full((L * (th + gap) - gap, H * (tw + gap) - gap), np.nan, dtype=np.float32)
    for l in range(L):
        for h in range(H):
            t = to_numpy(tiles[l][h])
            r0, c0 = l * (th + gap), h * (tw + gap)
            canvas[r0:r0 + t.shape[0], c0:c0 + t.shape[1]] = t
    zmax = float(np.nanmax(canvas)) or 1.0    # one scale shared by all tiles, so heads stay comparable
    flat = rules.narrow()   # a phone: the colour bar under the tiles, not beside them
    bar_w = 0 if flat else rules.colorbar_px(colorbar, ["0.8"])
    tile_px = min(90.0, max(16.0 if flat else 36.0, (width - 60 - bar_w) / H))   # a head's
    plot_h = tile_px * L * (th + gap) / (tw + gap)             # tile, gaps included (a phone's: as many as fit)
    stretched = plot_h < rules.MIN_PLOT                        # few layers on a narrow figure: taller tiles
    plot_h = max(plot_h, rules.MIN_PLOT)
    fig = go.Figure(go.Heatmap(z=canvas, colorscale=ATTN_SCALE, zmin=0, zmax=zmax, hoverinfo="skip",
                               colorbar=dict(title=dict(text=escape(colorbar)), lenmode="pixels",
                                             len=max(60, plot_h - 24), thickness=14)))
    cx = [h * (tw + gap) + (tw - 1) / 2 for l in range(L) for h in range(H)]
    cy = [l * (th + gap) + (th - 1) / 2 for l in range(L) for h in range(H)]
    fig.add_trace(go.Scatter(x=cx, y=cy, mode="markers", marker=dict(size=20, opacity=0, symbol="square"),
                             customdata=[[l, h] for l in range(L) for h in range(H)], showlegend=False,
                             hovertemplate=f"{escape(layer_label)} %{{customdata[0]}}, {escape(head_label)} "
                                           f"%{{customdata[1]}}<br>{escape(hover)}<extra></extra>",
                             selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0))))
    if selected is not None:
        l, h = selected
        fig.add_shape(type="rect", x0=h * (tw + gap) - 0.5, x1=h * (tw + gap) + tw - 0.5,
                      y0=l * (th + gap) - 0.5, y1=l * (th + gap) + th - 0.5, line=dict(color="#d62728", width=3))
    put(fig.layout, xaxis=dict(tickvals=[h * (tw + gap) + (tw - 1) / 2 for h in range(H)],
                               ticktext=[str(h) for h in range(H)], showgrid=False, zeroline=False),
        yaxis=dict(tickvals=[l * (th + gap) + (th - 1) / 2 for l in range(L)], ticktext=[str(l) for l in range(L)],
                   autorange="reversed", showgrid=False, zeroline=False, scaleanchor=None if stretched else "x"),
        hovermode="closest", hoverdistance=-1, clickmode="event+select", dragmode=False, plot_bgcolor="white")
    layout(fig, title, head_label, layer_label, width=width)
    m = fig.layout.margin
    fig_w = int(min(width, max(m.l + m.r + tile_px * H + bar_w + 20, text_px(title, rules.TITLE_PX) + 30)))
    if flat:
        colorbar_under(fig, fig.data[0], tile_px * H, plot_h)
        m = fig.layout.margin
    put(fig.layout, height=int(m.t + m.b + plot_h), width=fig_w if fig_w < width else None)
    return fig


def line_view(patterns, q_pieces: Sequence[str], k_pieces: Sequence[str], head_names: Sequence[str],
              title: str, max_lines: int = 300, min_weight: float = 0.02, query_label: str = "query",
              key_label: str = "key", colorbar: str = "attention weight", q_start: int = 0,
              k_start: int = 0) -> go.Figure:
    """BertViz-style lines: per head, queries on the left, keys on the right, one line per link,
    coloured and thickened by weight. Lines are binned into a few traces (not one trace per line),
    and at most max_lines per head are drawn. Each axis may show a window of the sequence: its
    labels are numbered from q_start / k_start (analysis.axis_windows)."""
    from viz_transformer.analysis.patterns import line_edges  # local import keeps plots importable without torch at module level
    pats = [to_numpy(p) for p in patterns]
    n = len(pats)
    fig = make_subplots(rows=1, cols=n, subplot_titles=[escape(h) for h in head_names], horizontal_spacing=0.04)
    edges_bins = np.array([0.0, 0.1, 0.25, 0.5, 0.75, 1.0001])
    colors = _sample_scale(ATTN_SCALE, (edges_bins[:-1] + edges_bins[1:]) / 2 * 0.8 + 0.2)
    Tq, Tk = len(q_pieces), len(k_pieces)
    qy, ky = _column_y(Tq), _column_y(Tk)
    ends = [query_label, key_label]                           # under each head's two columns
    q_text, k_text = labels(q_pieces, q_start), labels(k_pieces, k_start)
    x_range = [-0.9, 1.9]
    if rules.narrow():                   # a phone: the labels' room measured, not guessed
        ends = [rules.fit_label(e, 0) for e in ends]          # (without what the parentheses add)
        share = (rules.figure_px() - 40) / n - 12              # one head's plot, its gap left out
        side = (share - 60) / 2                               # at least 60 px of lines between the two columns
        q_text, k_text = ([escape(rules.fit_text(f"{i}:{p}", side, rules.TICK_PX)) for i, p in enumerate(ps, start)]
                          for ps, start in ((q_pieces, q_start), (k_pieces, k_start)))
        room = [max((text_px(x) for x in t), default=0) + 8 for t in (q_text, k_text)]
        lines = max(60.0, share - sum(room))
        x_range = [-room[0] / lines, 1 + room[1] / lines]
    ends = [escape(e) for e in ends]
    for c, pat in enumerate(pats, start=1):
        edges = line_edges(pat, min_weight, max_lines)
        for b in range(len(edges_bins) - 1):
            xs, ys = [], []
            for i, j, w in edges:
                if edges_bins[b] <= w < edges_bins[b + 1]:
                    xs += [0, 1, None]
                    ys += [qy[i], ky[j], None]
            if xs:
                fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                         line=dict(color=colors[b], width=0.8 + 5 * edges_bins[b + 1])),
                              row=1, col=c)
        fig.add_trace(go.Scatter(x=[-0.02] * Tq, y=qy, mode="text", text=q_text,
                                 textposition="middle left", hoverinfo="skip", showlegend=False), row=1, col=c)
        fig.add_trace(go.Scatter(x=[1.02] * Tk, y=ky, mode="text", text=k_text,
                                 textposition="middle right", hoverinfo="skip", showlegend=False), row=1, col=c)
        fig.update_xaxes(range=x_range, tickvals=[0, 1], ticktext=ends, showgrid=False, zeroline=False, row=1, col=c)
        fig.update_yaxes(range=[-0.03, 1.03], showticklabels=False, showgrid=False, zeroline=False, row=1, col=c)
    # an invisible marker carries the colour bar that explains line colour
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                             marker=dict(colorscale=ATTN_SCALE, cmin=0, cmax=1, color=[0], showscale=True,
                                         colorbar=dict(title=dict(text=escape(colorbar))))))
    height = int(min(1600, max(380, 60 + 20 * max(Tq, Tk))))
    layout(fig, title, "", "", height)
    if rules.narrow():                   # a phone: the colour bar under the lines
        m = fig.layout.margin
        colorbar_under(fig, fig.data[-1].marker, rules.figure_px() - m.l - m.r, fig.layout.height - m.t - m.b)
        fig.update_layout(height=fig.layout.height + 66)
    return fig


def _column_y(n: int) -> list[float]:
    """Token rows from top (1) to bottom (0)."""
    return [1.0] if n == 1 else [1 - i / (n - 1) for i in range(n)]


def _sample_scale(name: str, points) -> list[str]:
    import plotly.colors as pc
    return pc.sample_colorscale(name, [float(p) for p in points])


def head_rows(rows, key_pieces: Sequence[str], title: str, xlabel: str = "key", ylabel: str = "head",
              colorbar: str = "attention weight", width: Optional[int] = None) -> go.Figure:
    """[head, key] rows of one query (decoding): one row per head."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    a = to_numpy(rows)
    return heatmap(a, [f"{ylabel} {h}" for h in range(a.shape[0])], labels(key_pieces), title, xlabel, ylabel,
                   colorbar=colorbar, zmin=0, zmax=1, hover=colorbar, width=width)


def positional_heatmap(pe, title: str, xlabel: str = "dimension", ylabel: str = "position",
                       colorbar: str = "value", width: Optional[int] = None) -> go.Figure:
    """[positions, d_model] encoding table on a diverging scale (numeric axes: it can be 512 × 512)."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    a = to_numpy(pe)
    lim = float(np.abs(a).max()) or 1.0
    fig = go.Figure(go.Heatmap(z=a, colorscale=VALUE_SCALE, zmin=-lim, zmax=lim,
                               colorbar=dict(title=dict(text=escape(colorbar))),
                               hovertemplate=f"{escape(ylabel)} %{{y}}<br>{escape(xlabel)} %{{x}}<br>"
                                             f"{escape(colorbar)} %{{z:.3f}}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    return layout(fig, title, xlabel, ylabel, height=460, width=width)


def similarity_heatmap(sim, title: str, xlabel: str = "position", ylabel: str = "position",
                       colorbar: str = "dot product", width: Optional[int] = None) -> go.Figure:
    """[L, L] position-by-position similarity (numeric axes)."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    a = to_numpy(sim)
    fig = go.Figure(go.Heatmap(z=a, colorscale="Viridis", colorbar=dict(title=dict(text=escape(colorbar))),
                               hovertemplate=f"{escape(ylabel)} %{{y}}<br>{escape(xlabel)} %{{x}}<br>"
                                             f"{escape(colorbar)} %{{z:.3f}}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    return layout(fig, title, xlabel, ylabel, height=460, width=width)


# -- the lab ------------------------------------------------------------------------------------
def head_grid(values, title: str, layer_label: str = "layer", head_label: str = "head",
              colorbar: str = "value", marked: Sequence[tuple[int, int]] = (), hover: str = "click",
              limit: Optional[float] = None, signed: bool = True, fmt: str = ".2f") -> go.Figure:
    """The clickable layer × head grid: [layer, head] values with the number in each cell and an invisible
    clickable marker on every cell (customdata = [layer, head, value]); cells in `marked` get a frame.
    signed: a diverging scale centred on 0, ±limit (give grids of the same quantity one limit; default the
    largest |value|); else a sequential scale from 0 to limit (default the largest value), NaN cells (a
    statistic a block does not have) grey."""
    a = to_numpy(values)
    L, H = a.shape
    finite = a[np.isfinite(a)]
    top = float(np.abs(finite).max() if signed else finite.max()) if finite.size else 1.0
    top = (top if limit is None or not np.isfinite(limit) else float(limit)) or 1.0
    fig = go.Figure(go.Heatmap(z=a, x=list(range(H)), y=list(range(L)), hoverinfo="skip",
                               colorscale=VALUE_SCALE if signed else ATTN_SCALE, zmin=-top if signed else 0, zmax=top,
                               texttemplate=f"%{{z:{fmt}}}", textfont=dict(size=10),
                               colorbar=dict(title=dict(text=escape(colorbar)))))
    cells = [(l, h) for l in range(L) for h in range(H)]
    fig.add_trace(go.Scatter(x=[h for _, h in cells], y=[l for l, _ in cells], mode="markers", showlegend=False,
                             marker=dict(size=24, opacity=0, symbol="square"),
                             customdata=[[l, h, float(a[l, h]) if np.isfinite(a[l, h]) else None] for l, h in cells],
                             hovertemplate=f"{escape(layer_label)} %{{customdata[0]}}, {escape(head_label)} "
                                           f"%{{customdata[1]}}: %{{customdata[2]:{'.3f' if signed else fmt}}}<br>"
                                           f"{escape(hover)}<extra></extra>",
                             selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0))))
    for l, h in marked:
        fig.add_shape(type="rect", x0=h - 0.5, x1=h + 0.5, y0=l - 0.5, y1=l + 0.5,
                      line=dict(color="black" if signed else "#d62728", width=3))
    put(fig.layout, xaxis=dict(tickvals=list(range(H)), showgrid=False, zeroline=False),
        yaxis=dict(tickvals=list(range(L)), autorange="reversed", showgrid=False, zeroline=False),
        hovermode="closest", hoverdistance=-1, clickmode="event+select", dragmode=False,
        plot_bgcolor="white" if signed else "#d9d9d9")
    if not rules.narrow():
        return layout(fig, title, head_label, layer_label, height=max(220, 110 + 45 * L))
    layout(fig, title, head_label, layer_label)     # a phone: the bar under the grid, the plot as tall as it needs
    m, plot_h = fig.layout.margin, max(rules.MIN_PLOT, 45 * L)                  # however many lines the title took
    colorbar_under(fig, fig.data[0], rules.figure_px() - m.l - m.r, plot_h)
    m = fig.layout.margin
    fig.layout.height = int(m.t + m.b + plot_h)
    return fig
