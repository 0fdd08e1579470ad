"""The positional page for a RoPE model: the rotation per pair of dimensions, and the score of this model's own q and
k when both are moved by the same number of positions (flat: only the offset i − j counts) or only the query is."""
from __future__ import annotations

import streamlit as st

from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.analysis import patterns, positions
from viz_transformer.plots import charts, heatmaps


def section(ctx) -> None:
    cfg, run = ctx.hm.cfg, ctx.run
    st.markdown(t("pe.rope.intro", theta=f"{cfg.rope_theta:g}", d=cfg.d_head, kind=cfg.rope_type))
    n = st.slider(t("pe.n"), 8, min(512, cfg.max_len), min(64, cfg.max_len), key="pe_rope_n")
    widgets.show(heatmaps.positional_heatmap(positions.rope_angles(cfg, n), t("pe.rope.angles_title", n=n, h=cfg.d_head // 2),
                                             t("pe.rope.pair"), t("axis.position"), t("cb.value")), key="pe_rope_angles")
    if run is None:
        return
    T = len(run.tgt_pieces)
    c1, c2, c3, c4 = st.columns(4)
    layer = c1.selectbox(t("axis.layer"), list(range(cfg.n_decoder_layers)), key="pe_rope_layer")
    head = c2.selectbox(t("axis.head"), list(range(cfg.n_heads)), key="pe_rope_head")
    i = c3.selectbox(t("axis.query"), list(range(T)), index=T - 1, key=f"pe_rope_q_{T}",
                     format_func=lambda p: f"{p}:{run.tgt_pieces[p]}")
    j = c4.selectbox(t("axis.key"), list(range(i + 1)), index=0, key=f"pe_rope_k_{T}_{i}",
                     format_func=lambda p: f"{p}:{run.tgt_pieces[p]}")
    q = run.cache[patterns.hook_name("decoder.self_attn", layer, "hook_q")][0, i, head]
    k_all = run.cache[patterns.hook_name("decoder.self_attn", layer, "hook_k")]
    k = k_all[0, j, head // (cfg.n_heads // k_all.shape[2])]
    shifts = 32
    scores = positions.rope_offset_scores(cfg, q, k, i, j, shifts)
    series = {t("pe.rope.kept", d=i - j): scores["kept"], t("pe.rope.moved"): scores["moved"]}
    widgets.show(charts.curves(range(shifts + 1), series, t("pe.rope.scores_title", layer=layer, head=head),
                                 t("pe.rope.shift"), t("cb.score")), key="pe_rope_scores")
    st.caption(t("pe.rope.note"))
