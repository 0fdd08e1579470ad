"""Page: attention rollout of every self-attention part and a translator's source attribution, with the
method, its formula and its limits."""
from functools import partial

import pandas as pd
import streamlit as st

from viz_explorer.kit import context
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer import export
from viz_transformer.analysis import piece_labels
from viz_transformer.analysis import windows
from viz_transformer.plots import heatmaps

ctx = context.need_run()
run, cfg = ctx.run, ctx.hm.cfg
st.title(t("ro.title"))
widgets.intro("ro")
widgets.rows_note(run)
with st.expander(t("ro.method"), expanded=True):
    st.markdown(t("ro.method_md"))
    st.markdown(t("ro.limits_md"))


def _matrix(name: str, rows_of, q_pieces, k_pieces, key: str, block: str) -> None:
    """A relevance heatmap of the window shown, its rows computed alone (rows_of((a, b)) -> [b - a, keys]), with
    their CSV over every key (rows and columns labelled "i:piece"; a decoder row "i:▁an → ▁engineer")."""
    (qa, qb), (ka, kb) = widgets.window(len(q_pieces), len(k_pieces), f"{key}_window", pieces=k_pieces)
    m = rows_of((qa, qb))                                                        # (qb - qa, keys)
    widgets.show(heatmaps.attention_heatmap(m[:, ka:kb], q_pieces[qa:qb], k_pieces[ka:kb], name, t("axis.key"),
                                            widgets.query_axis(block), t("cb.relevance"), qa, ka,
                                            zmax=widgets.window_zmax(m[:, ka:kb], len(k_pieces))), key=key)
    df = pd.DataFrame(m.numpy(), index=[f"{i}:{p}" for i, p in enumerate(q_pieces[qa:qb], start=qa)],
                      columns=[f"{i}:{p}" for i, p in enumerate(k_pieces)])
    label = t("ro.csv") if qb - qa == len(q_pieces) else t("ro.csv_rows", qa=qa, qb=qb - 1)
    st.download_button(label, data=export.csv_bytes(df.reset_index(names="query")), file_name=f"{key}.csv",
                       mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/table:")


if cfg.is_encoder_only:                  # one block kind: the encoder's, over the text (both ways)
    _matrix(t("ro.rollout_title", block=widgets.block_label("encoder.self_attn")),
            partial(windows.rollout_rows, run.cache, "encoder"), run.src_pieces, run.src_pieces, "ro_encoder",
            "encoder.self_attn")
    st.stop()
if cfg.is_encoder_decoder:
    _matrix(t("ro.attr_title"), partial(windows.source_attribution_rows, run.cache),
            piece_labels.query_labels(run, "decoder.cross_attn"), run.src_pieces, "ro_attr", "decoder.cross_attn")
    _matrix(t("ro.rollout_title", block=widgets.block_label("encoder.self_attn")),
            partial(windows.rollout_rows, run.cache, "encoder"), run.src_pieces, run.src_pieces, "ro_encoder",
            "encoder.self_attn")
else:
    st.caption(t("ro.lm_note"))
_matrix(t("ro.rollout_title", block=widgets.block_label("decoder.self_attn")),
        partial(windows.rollout_rows, run.cache, "decoder"), piece_labels.query_labels(run, "decoder.self_attn"),
        run.tgt_pieces, "ro_decoder", "decoder.self_attn")
