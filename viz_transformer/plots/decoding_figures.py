"""Figures of decoding: the candidates of one step as bars, and beam search as a tree. Pure functions, no
streamlit; labels are escaped as in plots.py."""
from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go

from viz_transformer.plots import figure_rules as rules
from viz_transformer.plots.numbers import fmt_probs
from viz_transformer.plots.style import ATTN_SCALE, escape, labels, layout, to_numpy


def probability_bars(pieces: Sequence[str], probs: Sequence[float], title: str, chosen: Optional[int] = None,
                     xlabel: str = "probability", ylabel: str = "candidate token",
                     colorbar: str = "probability", width: Optional[int] = None) -> go.Figure:
    """Horizontal bars, most likely on top; bar colour = probability; the chosen one is outlined."""
    width = width or rules.figure_px()             # the page run's screen (figure_rules.screen)
    p = to_numpy(probs)
    names = labels(pieces)
    outline = [3 if i == chosen else 0 for i in range(len(p))]
    fig = go.Figure(go.Bar(x=p, y=names, orientation="h", text=fmt_probs(p), textposition="auto",
                           marker=dict(color=p, colorscale=ATTN_SCALE, cmin=0, cmax=1, showscale=True,
                                       line=dict(color="#d62728", width=outline),
                                       colorbar=dict(title=dict(text=escape(colorbar)))),
                           hovertemplate="%{y}: %{text}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(range=[0, 1])
    return layout(fig, title, xlabel, ylabel, height=max(260, 100 + 28 * len(p)), width=width)


def beam_tree(links: list[list[dict]], title: str, xlabel: str = "step", ylabel: str = "beam (rank)",
              colorbar: str = "log-probability", survive_label: str = "extended",
              drop_label: str = "dropped", finish_label: str = "finished") -> go.Figure:
    """Beam search as a tree: x = step (from 1), y = rank in that step, node text = newest piece, colour =
    cumulative log-probability. Edges join a beam to its parent; dropped beams are hollow,
    finished beams are diamonds; red edges follow the chosen hypothesis. links: analysis.beam_links(trace)."""
    fig = go.Figure()
    edges = {False: ([], []), True: ([], [])}      # on the chosen path or not
    for t in range(1, len(links)):
        for r, b in enumerate(links[t]):
            if b["parent"] >= 0:
                ex, ey = edges[bool(b.get("best")) and bool(links[t - 1][b["parent"]].get("best"))]
                ex += [t, t + 1, None]
                ey += [b["parent"], r, None]
    for best, (ex, ey) in edges.items():
        fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color="#d62728" if best else "#9e9e9e", width=3.5 if best else 1.5)))
    xs, ys, cs, txt, hov, sym = [], [], [], [], [], []
    last = len(links) - 1
    for t, row in enumerate(links):
        for r, b in enumerate(row):
            state = finish_label if b["finished"] else (survive_label if b["survives"] or t == last else drop_label)
            xs.append(t + 1)
            ys.append(r)
            cs.append(b["score"])
            txt.append(escape(b["pieces"][-1]) if b["pieces"] else "")
            hov.append(escape(" ".join(b["pieces"])) + f"<br>{escape(colorbar)} {b['score']:.3f}<br>{escape(state)}")
            sym.append("diamond" if b["finished"] else ("circle" if state == survive_label else "circle-open"))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", text=txt, textposition="top center",
                             hovertext=hov, hoverinfo="text", showlegend=False,
                             marker=dict(size=14, color=cs, colorscale="Viridis", symbol=sym, showscale=True,
                                         line=dict(width=2, color="#555"),
                                         colorbar=dict(title=dict(text=escape(colorbar))))))
    fig.update_yaxes(autorange="reversed", dtick=1)
    fig.update_xaxes(dtick=1)
    width = max((len(r) for r in links), default=1)
    return layout(fig, title, xlabel, ylabel, height=max(260, 120 + 60 * width))
