"""The Overview's "what the model gives" for an encoder-only model, which generates nothing: a masked-LM's
best pieces at each blank of the text (or how to make one), a sentence encoder's sentence embedding (its size
and how the folder pools it). The links above it lead further (overview_head.output_end)."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit.sentence_view import pipeline_label
from viz_explorer.kit.strings import t
from viz_transformer.core.checkpoint_files import CheckpointError
from viz_transformer.run import fill_mask, pooling

TOP = 3


def show(hm, run, path, stamp: float) -> None:
    """Drawn where a generating model's output goes (user text only through st.text)."""
    if hm.cfg.head == "mlm":
        blanks = fill_mask.fill_blanks(hm, run, k=TOP)
        if not blanks:
            st.info(t("fb.no_mask", mask=hm.tokenizer.mask_token or "[MASK]"))
        for b in blanks:
            st.caption(t("fb.at", i=b.position, piece=run.src_pieces[b.position]))
            st.text("  ".join(f"{piece} {p:.2f}" for piece, p in b.top))
        return
    try:
        pipe = cached.sentence_pipeline(str(path), stamp)
    except CheckpointError as e:
        st.error(f"{t('cp.no_embedding')} {e}")
    else:
        vec = pooling.embedding(run, pipe)
        st.markdown(f"**{t('ov.enc.embedding', n=vec.numel())}**")
        st.caption(pipeline_label(pipe))
        st.text(", ".join(f"{v:+.3f}" for v in vec[:6].tolist()) + ", …")
