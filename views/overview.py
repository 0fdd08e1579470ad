"""Page 1: the checkpoint's architecture, the text as SentencePiece pieces, and the model's output."""
import streamlit as st

from views import context
from views.strings import t
from viz_transformer import analysis

ctx = context.need_run()
hm, run, cfg = ctx.hm, ctx.run, ctx.hm.cfg

st.title(t("ov.title"))
st.caption(t("ov.intro"))

left, right = st.columns([1, 1])
with left:
    st.subheader(t("ov.arch"))
    st.markdown(f"**{t('ov.arch.' + cfg.architecture)}**")
    facts = {k: str(v) for k, v in hm.describe().items()}
    st.dataframe({t("ov.fact"): list(facts), t("ov.value"): list(facts.values())}, hide_index=True,
                 height=38 + 35 * len(facts))
with right:
    st.subheader(t("ov.output." + ("encoder_decoder" if cfg.is_translator else "lm")))
    st.code(run.output or t("ov.empty_output"), language=None, wrap_lines=True)
    st.subheader(t("ov.training"))
    summary = analysis.training_summary(hm.meta)
    metrics = analysis.headline_metrics(summary)
    for where, (name, value) in zip(st.columns(max(1, len(metrics))), metrics.items()):
        where.metric(name, value)
    st.json(summary, expanded=False)

st.subheader(t("ov.pieces"))
st.caption(t("ov.pieces_help"))
cols = {"pos": t("ov.col.pos"), "piece": t("ov.col.piece"), "id": t("ov.col.id"), "word": t("ov.col.word"),
        "starts": t("ov.col.starts")}
parts = [("encoder", run.src_ids, run.src_pieces), ("decoder", run.tgt_ids, run.tgt_pieces)]
for (part, ids, pieces), where in zip(parts, st.columns(2)):
    if ids is None:
        continue
    with where:
        st.markdown(f"**{t('ov.src') if part == 'encoder' else t('ov.tgt')}**")
        rows = analysis.pieces_table(ids, pieces)
        st.dataframe({cols[k]: [r[k] for r in rows] for k in cols}, hide_index=True, height=min(600, 38 + 35 * len(rows)))
