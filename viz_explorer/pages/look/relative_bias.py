"""The positional page for a T5 model: the learned bias each head adds to its scores by offset (the buckets
visible: one per offset near, logarithmically wider far), and the [query × key] matrix it adds for this text."""
from __future__ import annotations

import streamlit as st

from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.core.positional import bias_capture
from viz_transformer.plots import charts, heatmaps


def section(ctx) -> None:
    cfg, run, model = ctx.hm.cfg, ctx.run, ctx.hm.model
    st.markdown(t("pe.rel.intro", b=cfg.rel_buckets, m=cfg.rel_max_distance))
    st.markdown(t("pe.rel.rope"))
    parts = [p for p in ("encoder", "decoder") if model.relative_bias(p) is not None]
    c1, c2 = st.columns(2)
    part = c1.radio(t("pe.rel.stack"), parts, format_func=in_language(lambda p: t(f"pe.rel.{p}")), horizontal=True,
                    key="pe_rel_part")
    top = max(16, 2 * cfg.rel_max_distance)
    m = c2.slider(t("pe.rel.max"), 8, top, min(top, cfg.rel_max_distance + cfg.rel_max_distance // 4),
                  key=f"pe_rel_max_{top}")
    offsets, bias, buckets = model.relative_bias(part).by_offset(m)
    x, xlabel = offsets.tolist(), t("pe.rel.offset")
    widgets.show(charts.curves(x, {t("pe.rel.head", h=h): bias[h].tolist() for h in range(bias.shape[0])},
                               t("pe.rel.by_offset_title", part=t(f"pe.rel.{part}")), xlabel, t("cb.bias")),
                 key="pe_rel_by_offset")
    widgets.show(charts.curves(x, {t("pe.rel.bucket"): buckets.tolist()}, t("pe.rel.buckets_title", b=cfg.rel_buckets),
                               xlabel, t("pe.rel.bucket"), height=300), key="pe_rel_buckets")
    st.caption(t("pe.rel.buckets_note", e=cfg.rel_buckets // (4 if part == "encoder" else 2), m=cfg.rel_max_distance))
    if run is None:
        return
    pieces = run.src_pieces if part == "encoder" else run.tgt_pieces
    head = st.selectbox(t("axis.head"), list(range(cfg.n_heads)), key="pe_rel_head")
    matrix = run.cache[bias_capture(f"{part}.0.self_attn")][0, head]                     # (q, k)
    labels = [f"{i}:{p}" for i, p in enumerate(pieces)]
    widgets.show(heatmaps.values_heatmap(matrix, labels, labels, t("pe.rel.matrix_title", head=head, n=len(pieces)),
                                         t("axis.key"), t("axis.query"), t("cb.bias")), key="pe_rel_matrix")
    st.caption(t("pe.rel.matrix_note"))
