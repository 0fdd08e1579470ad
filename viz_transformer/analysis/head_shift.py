"""Which heads attend differently to two texts: each head described by where its attention goes (the shares
of head_stats: the first piece, the last, the piece itself, the previous one, punctuation), and the heads
ranked by the largest change of one share between the two texts. Shares are means over rows, so two texts of
different lengths compare.

    shifts = head_shifts(run_a, run_b)     # encoder self-attention; rows: layer, head, share, a, b, change; largest first
"""
from __future__ import annotations

import pandas as pd

from viz_transformer.analysis.summaries import head_stats

SHARES = ("first_token", "last_token", "self", "prev_token", "punctuation")
COLUMNS = ["layer", "head", "share", "a", "b", "change"]


def head_shifts(run_a, run_b, block: str = "encoder.self_attn") -> pd.DataFrame:
    """One row per head of `block`: the share whose mean weight changes most between the two runs, its value
    in each (a, b) and the change b − a; sorted by |change|, largest first."""
    a, b = (head_stats(r) for r in (run_a, run_b))
    a, b = (t[t["block"] == block].set_index(["layer", "head"]) for t in (a, b))
    rows = []
    for (layer, head), ra in a.iterrows():
        rb = b.loc[(layer, head)]
        changes = {s: float(rb[s] - ra[s]) for s in SHARES if pd.notna(ra[s]) and pd.notna(rb[s])}
        if changes:
            share = max(changes, key=lambda s: abs(changes[s]))
            rows.append([int(layer), int(head), share, float(ra[share]), float(rb[share]), changes[share]])
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.reindex(out["change"].abs().sort_values(ascending=False).index).reset_index(drop=True)
