"""Compare two inputs on a sentence encoder: the cosine similarity of the two texts' sentence embeddings (the
folder's own pooling, Dense and Normalize modules) and the heads whose attention moves most between them."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import page_parts
from viz_explorer.kit.strings import t
from viz_transformer.analysis.head_shift import head_shifts
from viz_transformer.core.checkpoint_files import CheckpointError
from viz_transformer.run import pooling

TOP = 5


def pipeline_label(pipe) -> str:
    """"mean over the pieces, then 1 Dense layer, unit length" in the page's language."""
    parts = [" + ".join(t("cp.pool." + m) for m in pipe.modes)]
    if pipe.dense:
        parts.append(t("cp.pipe_dense", n=len(pipe.dense)))
    if pipe.normalize:
        parts.append(t("cp.pipe_norm"))
    return t("cp.pipe_sep").join(parts)


def show(path, stamp: float, run, run2) -> None:
    try:
        pipe = cached.sentence_pipeline(str(path), stamp)
    except CheckpointError as e:
        st.error(f"{t('cp.no_embedding')} {e}")
    else:
        st.metric(t("cp.cosine"), f"{pooling.similarity(run, run2, pipe):.3f}")       # a label a phone shows whole
        st.caption(f"{t('cp.cosine_of', mode=pipeline_label(pipe))} "
                   f"{t('cp.cosine_help' if pipe.declared else 'cp.cosine_help_mean')}")
        for r in (run, run2):
            if over := pipe.beyond(len(r.src_ids)):
                st.info(t("cp.beyond", limit=pipe.max_seq_length, n=len(r.src_ids), over=over))
    shifts = head_shifts(run, run2, "encoder.self_attn").head(TOP)
    st.subheader(t("cp.shift_title"))
    st.caption(t("cp.shift_help"))
    page_parts.table({t("cp.col.head"): [t("cp.head_at", layer=int(r.layer), head=int(r.head)) for r in shifts.itertuples()],
                      t("cp.col.share"): [t(f"hs.stat.{s}") for s in shifts["share"]],
                      t("cp.col.a"): [f"{v:.2f}" for v in shifts["a"]], t("cp.col.b"): [f"{v:.2f}" for v in shifts["b"]],
                      t("cp.col.change"): [f"{v:+.2f}" for v in shifts["change"]]})
