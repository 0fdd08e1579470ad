"""Page: the checkpoint's architecture as a diagram with the text's shapes, how it was trained, the text
as its tokenizer's pieces, and the model's output."""
from pathlib import Path

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import confidence_note
from viz_explorer.kit import context
from viz_explorer.kit import encoder_output
from viz_explorer.kit import language_pair
from viz_explorer.kit import overview_head
from viz_explorer.kit import parity_badge
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import has, t
from viz_transformer.analysis import piece_labels, training_curves
from viz_transformer.plots import charts

ctx = context.need_run()
hm, run, cfg = ctx.hm, ctx.run, ctx.hm.cfg

right = overview_head.draw(cfg, len(run.src_ids) if run.src_ids is not None else None, len(run.tgt_ids),
                           tokenizer=piece_labels.tokenizer_kind(hm.tokenizer))
with right:
    language_pair.selectors(ctx)                    # a multilingual translator's source and target
    if cfg.is_encoder_only:                         # generates nothing: its blanks, or its sentence embedding
        if (hm.meta or {}).get("task") == "mlm":    # trained here by train.py --task mlm: the seeds' BERT
            st.caption(widgets.md_escape(t("ov.family.bert", layers=cfg.n_encoder_layers, heads=cfg.n_heads,
                                           d=cfg.d_model, data=Path(str(hm.meta.get("data", "–"))).name)))
        encoder_output.show(hm, run, ctx.path, ctx.stamp)
    else:
        widgets.output(run.output or t("ov.empty_output"), "overview")
        confidence_note.of_run(hm, run)
    parity_badge.show(ctx)
    with st.expander(t("ov.settings")):
        facts = hm.describe()
        norm = t("dg.norm.rms" if cfg.norm_type == "rms" else "dg.norm")          # LayerNorm or RMSNorm
        for k, name in (("architecture", "ov.arch."), ("norm", "ov.norm."), ("positional", "pe.kind.")):
            facts[k] = t(name + str(facts[k]), norm=norm)
        widgets.table({t("ov.fact"): [t("ov.f." + k) for k in facts], t("ov.value"): [str(v) for v in facts.values()]})

# -- training: readable metrics and the loss curve when the checkpoint has one --------------------------
st.subheader(t("ov.training"))
meta = hm.meta or {}
if meta.get("trained_at"):
    st.caption(widgets.md_escape(t("ov.trained", when=meta["trained_at"], data=meta.get("data", "–"),
                                   task=t("ov.task." + meta["task"]) if has("ov.task." + str(meta.get("task")))
                                   else meta.get("task", "–"))))
metrics = training_curves.training_metrics(meta)
fmt = {"params": lambda v: f"{v:,.0f}", "items": lambda v: f"{v:,.0f}", "epoch": lambda v: f"{v:.0f}",
       "seconds": lambda v: t("ov.m.minutes", m=v / 60)}
fmt.update({f"{split}_top{k}_{lang}": lambda v: f"{v:.1%}" for split in ("test", "val") for k in (1, 5)
            for lang in ("zh", "en")})
shown = list(metrics.items())
for row in range(0, len(shown), 4):              # four to a row: long numbers stay whole
    for where, (k, v) in zip(st.columns(4), shown[row:row + 4]):
        where.metric(t("ov.m." + ("time" if k == "seconds" else k)), fmt.get(k, lambda v: f"{v:g}")(v))
snaps = cached.snapshots(str(ctx.path), ctx.stamp)
fine = snaps.loss_curve if snaps is not None else None
curve = fine or training_curves.epoch_curve(meta)       # the snapshots' fine curve, else meta.json's one point an epoch
if curve:
    steps, losses = zip(*curve)
    widgets.show(charts.curves(steps, {t("ov.loss_y"): losses}, t("ov.loss_title"), t("ov.loss_x"), t("ov.loss_y"),
                              height=300), key="ov_loss")
    if not fine:
        st.caption(t("ov.epoch_curve"))
else:
    st.caption(t("ov.no_curve"))

# -- the text as pieces ---------------------------------------------------------------------------------
st.subheader(t("ov.pieces"))
st.caption(t("ov.pieces_help"))
cols = {"pos": t("ov.col.pos"), "piece": t("ov.col.piece"), "id": t("ov.col.id"), "word": t("ov.col.word"),
        "starts": t("ov.col.starts")}
parts = [(part, ids, pieces) for part, ids, pieces in (("encoder", run.src_ids, run.src_pieces),
                                                        ("decoder", run.tgt_ids, run.tgt_pieces)) if ids]
for (part, ids, pieces), where in zip(parts, st.columns(len(parts))):    # one sequence: one table, full width
    with where:
        st.markdown(f"**{t('ov.src') if part == 'encoder' else t('ov.tgt')}**")
        rows = piece_labels.pieces_table(ids, pieces)
        widgets.table({cols[k]: [r[k] for r in rows] for k in cols})
marks = [(part, i) for part, _, pieces in parts for i in piece_labels.bare_word_marks(pieces)]
if marks:                                         # said once, under the tables
    st.caption(t("ov.bare_mark", pos=marks[0][1], part=t("ov.src" if marks[0][0] == "encoder" else "ov.tgt")))
