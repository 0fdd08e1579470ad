"""The lens page on an encoder-only model: fill in the blank, the top pieces at each [MASK] and what each layer
already predicts there (run.fill_mask), as tables."""
from __future__ import annotations

import streamlit as st

from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_explorer.pages.step import lens_table
from viz_transformer.plots.numbers import fmt_prob
from viz_transformer.run.fill_mask import fill_blanks


def show(ctx) -> None:
    hm = ctx.hm
    st.subheader(t("fb.title"))
    if hm.cfg.head != "mlm":
        st.info(t("fb.no_head"), icon=":material/info:")
        return
    blanks = fill_blanks(hm, ctx.run)
    if not blanks:
        st.info(t("fb.no_mask", mask=getattr(hm.tokenizer, "mask_token", None) or "[MASK]"), icon=":material/info:")
        return
    st.caption(t("fb.intro"))
    for b in blanks:
        st.markdown(t("fb.at", i=b.position, piece=widgets.md_escape(ctx.run.src_pieces[b.position])))
        st.dataframe([{t("fb.col.piece"): p, t("fb.col.prob"): fmt_prob(q)} for p, q in b.top], hide_index=True,
                     key=f"fb_top_{b.position}")
        names = lens_table.row_labels(len(b.layers))
        st.dataframe([{t("ln.col.row"): names[r], t("ln.col.top"): ", ".join(f"{p} ({fmt_prob(q)})" for p, q in row)}
                      for r, row in reversed(list(enumerate(b.layers)))], hide_index=True, key=f"fb_lens_{b.position}")
