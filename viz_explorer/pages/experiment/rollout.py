"""Page: attention rollout of every self-attention part and a translator's source attribution, with the
method, its formula and its limits."""
import pandas as pd
import streamlit as st

from viz_explorer.kit import context
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer import export
from viz_transformer.analysis import piece_labels
from viz_transformer.analysis import summaries
from viz_transformer.plots import summary_figures

ctx = context.need_run()
run, cfg = ctx.run, ctx.hm.cfg
st.title(t("ro.title"))
widgets.intro("ro")
widgets.rows_note(run)
with st.expander(t("ro.method"), expanded=True):
    st.markdown(t("ro.method_md"))
    st.markdown(t("ro.limits_md"))


def _matrix(name: str, m, q_pieces, k_pieces, key: str, block: str) -> None:
    """A relevance heatmap with its CSV (rows and columns labelled "i:piece"; a decoder row "i:▁an → ▁engineer")."""
    widgets.show(summary_figures.relevance_heatmap(m, q_pieces, k_pieces, name, t("axis.key"), widgets.query_axis(block),
                                                 colorbar=t("cb.relevance")), key=key)
    df = pd.DataFrame(m.numpy(), index=[f"{i}:{p}" for i, p in enumerate(q_pieces)],
                      columns=[f"{i}:{p}" for i, p in enumerate(k_pieces)])
    st.download_button(t("ro.csv"), data=export.csv_bytes(df.reset_index(names="query")), file_name=f"{key}.csv",
                       mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/table:")


if cfg.is_encoder_only:                  # one block kind: the encoder's, over the text (both ways)
    _matrix(t("ro.rollout_title", block=widgets.block_label("encoder.self_attn")),
            summaries.rollout(run.cache, "encoder"), run.src_pieces, run.src_pieces, "ro_encoder", "encoder.self_attn")
    st.stop()
if cfg.is_encoder_decoder:
    _matrix(t("ro.attr_title"), summaries.source_attribution(run.cache),
            piece_labels.query_labels(run, "decoder.cross_attn"), run.src_pieces, "ro_attr", "decoder.cross_attn")
    _matrix(t("ro.rollout_title", block=widgets.block_label("encoder.self_attn")),
            summaries.rollout(run.cache, "encoder"), run.src_pieces, run.src_pieces, "ro_encoder", "encoder.self_attn")
else:
    st.caption(t("ro.lm_note"))
_matrix(t("ro.rollout_title", block=widgets.block_label("decoder.self_attn")),
        summaries.rollout(run.cache, "decoder"), piece_labels.query_labels(run, "decoder.self_attn"), run.tgt_pieces,
        "ro_decoder", "decoder.self_attn")
