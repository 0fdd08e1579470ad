"""What the lens page and the step-through page share: row names, one position's table and figure."""
from __future__ import annotations

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.analysis import decoding_steps
from viz_transformer.run import lenses
from viz_transformer.plots import lens_figures
from viz_transformer.plots.numbers import fmt_prob


def row_labels(n_rows: int) -> list[str]:
    return [t("ln.row.embed")] + [t("ln.row.layer", i=i) for i in range(n_rows - 1)]


def column_table(col: dict, final_piece: str) -> list[dict]:
    """One position: per residual stream, its top tokens and P(final token)."""
    names = row_labels(len(col["final_prob"]))
    return [{t("ln.col.row"): names[r],
             t("ln.col.top"): ", ".join(f"{p} ({fmt_prob(q)})" for p, q in zip(col["top_pieces"][r], col["top_probs"][r])),
             t("ln.col.final", final=final_piece): fmt_prob(col["final_prob"][r])} for r in reversed(range(len(names)))]


def step_lens(ctx, trace, i: int, settings) -> None:
    """An expander on the step-through page: decoding step i (1-based) of the trace made with `settings`
    (DecodeSettings) read after every layer."""
    s = trace.steps[i - 1]
    with st.expander(t("ln.step_lens"), icon=":material/layers:"):
        st.caption(t("ln.step_lens_help"))
        lp = cached.trace_lens(str(ctx.path), ctx.stamp, ctx.text, i - 1, settings)
        col = lenses.column(ctx.hm, lp, s.token_id)
        query = decoding_steps.step_query(trace, i - 1)
        names = row_labels(lp.shape[0])
        widgets.show(lens_figures.lens_grid(col["final_prob"][:, None], [[p[0]] for p in col["top_pieces"]], names,
                                          [query], [s.piece], t("ln.step_lens_title", i=i, query=query),
                                          t("ln.axis.pos"), t("ln.axis.row"), t("ln.cb"), hover_top=t("ln.hover_top")),
                     key="dc_lens")
        st.dataframe(column_table(col, s.piece), hide_index=True, key="dc_lens_table")
