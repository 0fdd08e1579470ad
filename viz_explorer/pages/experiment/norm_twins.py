"""Pre-norm against its post-norm twin (Compare architectures, tab "norm"): the two runs' loss and BLEU over
training, what they show in numbers, and the same head's attention at the same recorded step, side by side."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import callbacks
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import architectures as A
from viz_transformer.analysis import patterns
from viz_transformer.plots import charts, heatmaps


def show(pre: Path, post: Path) -> None:
    stamps = [cached.folder_stamp(p) for p in (pre, post)]
    pre_hm, post_hm = (cached.load_model(str(p), s) for p, s in zip((pre, post), stamps))
    pre_snaps, post_snaps = (cached.snapshots(str(p), s) for p, s in zip((pre, post), stamps))
    names = {"pre": t("ar.twin_pre", name=pre.name), "post": t("ar.twin_post", name=post.name)}
    numbers = A.norm_twins(pre_hm.meta or {}, post_hm.meta or {}, _loss(pre_snaps), _loss(post_snaps))
    if numbers is None:
        st.info(t("ar.twin_no_curve", pre=pre.name, post=post.name))
        return
    st.markdown(t("ar.twin_reads", **numbers, pre_loss_s=_num(numbers["pre_loss"]),
                  post_loss_s=_num(numbers["post_loss"])))

    common = [s for s in pre_snaps.steps if s in post_snaps.steps] if pre_snaps and post_snaps else []
    step = None
    if common:
        step = widgets.select(st, t("ar.twin_step"), common, "nt_step", default=common[-1],
                              format_func=lambda s: f"{s:,}")
    curves = {names[k]: ([s for s, _ in c], [v for _, v in c])
              for k, c in (("pre", _loss(pre_snaps)), ("post", _loss(post_snaps))) if c}
    left, right = st.columns(2)
    with left:
        if curves:
            widgets.show(charts.xy_curves(curves, t("ar.twin_loss"), t("tr.x"), t("tr.m_loss"), log_x=True,
                                            height=340, mark_x=step), key="nt_loss")
    with right:
        bleu = {names[k]: ([h["step"] for h in m["curve"]], [h["bleu"] for h in m["curve"]])
                for k, m in (("pre", pre_hm.meta), ("post", post_hm.meta))}
        widgets.show(charts.xy_curves(bleu, t("ar.twin_bleu"), t("ar.twin_x"), t("ar.twin_bleu_y"), height=340,
                                        mark_x=step), key="nt_bleu")
    if not common:
        st.caption(t("ar.twin_no_snapshots"))
        return

    c = st.columns([3, 3, 1, 1])
    j = widgets.select(c[0], t("tr.sentence"), list(range(len(pre_snaps.texts))), "nt_text",
                       format_func=in_language(callbacks.snapshot_pair(pre_snaps)))
    block, layer, head = widgets.block_layer_head([c[1], c[2], c[3]], pre_hm.cfg, "nt", default_block="decoder.cross_attn")
    name = patterns.hook_name(block, layer, "hook_pattern")
    st.caption(t("ar.twin_same", step=step, name=name, head=widgets.head_label(head)))
    for where, k, snaps in zip(st.columns(2), ("pre", "post"), (pre_snaps, post_snaps)):
        pats = snaps.stack(snaps.steps.index(step), j, block)
        mat = patterns.reduce_heads(pats[layer], head) if isinstance(head, str) else pats[layer, head]
        q_pieces, k_pieces = snaps.axes(j, block)         # each twin's own pieces (the same recipe)
        with where:
            widgets.show(heatmaps.attention_heatmap(
                mat, q_pieces, k_pieces, t("ar.twin_heat", model=names[k], step=step), t("axis.key"),
                t("axis.query" if block == "encoder.self_attn" else "axis.query_ref"), t("cb.weight")), key=f"nt_heat_{k}")


def show_sweep(post: Path) -> None:
    """A post-norm model without a twin: its learning-rate sweep (both norms, the same settings and short budget)
    from its meta.json, the curves, the table and what they show."""
    hm = cached.model_facts(str(post), cached.folder_stamp(post))
    sweep = A.schedule_sweep(hm.meta or {})
    st.subheader(t("ar.sweep"))
    st.markdown(t("ar.twin_missing", post=post.name))
    if sweep is None:
        return
    rate = lambda lr: f"{lr:.0e}".replace("e-0", "e-")                      # 7e-4, as the commands write it
    words = lambda r: dict(schedule=r["schedule"], lr=rate(r["lr"]), warmup=r["warmup"])
    curves = {t("ar.sweep_line", norm=t(f"ov.norm_short.{norm}"), setting=t("ar.sweep_short", **words(r))):
              (range(1, len(r[f"{norm}_curve"]) + 1), r[f"{norm}_curve"]) for norm in ("post", "pre") for r in sweep["rows"]}
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]      # one per setting; post-norm solid, pre-norm dashed
    styles = [dict(color=colours[i % len(colours)], dash="solid" if norm == "post" else "dash", width=2)
              for norm in ("post", "pre") for i in range(len(sweep["rows"]))]
    widgets.show(charts.xy_curves(curves, t("ar.sweep_fig", epochs=sweep["epochs"]), t("ar.sweep_x"),
                                  t("ar.twin_bleu_y"), height=420, styles=styles), key="nt_sweep")
    cols = ("schedule", "lr", "warmup", "post", "pre", "lead")
    st.dataframe([{t(f"ar.sweep_col.{c}"): (rate(r[c]) if c == "lr" else r[c]) for c in cols} for r in sweep["rows"]],
                 hide_index=True)
    numbers = {k: sweep[k] for k in ("epochs", "updates", "val_pairs", "lead_min", "lead_max", "pre_led", "n", "val", "test")}
    st.markdown(t("ar.sweep_reads", **numbers, picked=t("ar.sweep_setting", **words(sweep["picked"])), name=post.name)
                + (" " + t("ar.sweep_old", old_val=sweep["old_val"], old_test=sweep["old_test"])
                   if sweep["old_test"] is not None else ""))


def _loss(snaps) -> list:
    return list(snaps.loss_curve) if snaps is not None and snaps.loss_curve else []


def _num(v) -> str:
    return "–" if v is None else f"{v:.2f}"
