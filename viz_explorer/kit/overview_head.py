"""The Overview's opening, which needs no model, only its config: the title, the intro, the architecture
diagram with the text's shapes and the links to the page of each block. The Overview page draws it. Light: no torch.
"""
from __future__ import annotations

from typing import Optional

import streamlit as st

from viz_explorer.kit import page_parts, registry
from viz_explorer.kit.strings import has, plurals, t
from viz_transformer.core.config import ModelConfig
from viz_transformer.plots import diagram, figure_rules

LINKS = [("pos", "positional"), ("attn", "attention"), ("qkv", "step_by_step"), ("mask", "masks")]  # (block, page)
CROSS = [("cross", "attention")]            # encoder-decoders only
# A page link's label stays on one line and is cut at its column's edge ("positional encoding → Positional enc"
# at 1366 px): these wrap instead. A fixed string, no user content.
WRAP = """<style>.st-key-ov_links [data-testid="stPageLink"] :is(span, p) { white-space: normal; overflow: visible; }
</style>"""
OUTPUT_END = [("softmax", "decoding"), ("heads", "knockout")]


def output_end(cfg: ModelConfig) -> list[tuple[str, str]]:
    """The output end's links: an encoder-only model decodes nothing; its masked-LM head is read on the logit
    lens page (fill in the blank), and a sentence encoder's output is compared on Compare two inputs."""
    if not cfg.is_encoder_only:
        return OUTPUT_END
    return [("mlm", "lens") if cfg.head == "mlm" else ("embedding", "compare"), ("heads", "knockout")]


def draw(cfg: ModelConfig, src_len: Optional[int], tgt_len: int, note: Optional[str] = None,
         tokenizer: str = "sentencepiece"):
    """Title, intro, the diagram (src_len / tgt_len: the encoder's and the decoder's positions; src_len None
    for a one-sequence model) with `note` under its caption, and the links. tokenizer: what cuts the text
    (piece_labels.tokenizer_kind), named in the intro. Returns the column beside the diagram, under the links, for
    the caller's part (the model's output)."""
    st.title(t("ov.title"))
    page_parts.intro("ov", extra="ov.intro2", latex="ov." + cfg.norm, tokenizer=t("ov.tok." + tokenizer),
                     norm=t("ov.ln." + cfg.norm_type))
    st.subheader(t("ov.diagram"))
    st.caption(t("ov.diagram_help"))
    # templates the diagram fills in itself: only their plural words are chosen here
    labels = {k: plurals(t("dg." + k), h=cfg.n_heads) for k in diagram.LABELS if has("dg." + k)}
    labels.update({f"pos.{k}": t(f"pe.kind.{k}") for k in ("sinusoidal", "learned")})
    title = t("ov.diagram_title", arch=t("ov.arch." + cfg.architecture), layers=page_parts.layers_label(cfg),
              heads=cfg.n_heads,
              d_model=cfg.d_model, norm=t("ov.norm_short." + cfg.norm))
    left, right = st.columns([5, 2])
    with left:
        # on a phone each column of blocks is a figure of its own, fitted to the phone's column, the title on the first
        fit_px, parts = diagram.narrow_layout(cfg, figure_rules.figure_px()) if figure_rules.narrow() \
            else (diagram.FIT_PX, (None,))
        with st.container(key="ov_diagram_box"):
            for i, part in enumerate(parts):
                fig = diagram.architecture_diagram(cfg, src_len, tgt_len, labels, "" if i else title, fit_px, part)
                page_parts.show(fig, key="ov_diagram" + (f"_{part}" if i else ""))
    with right:
        st.markdown(f"**{t('ov.open')}**")
        st.html(WRAP)
        with st.container(key="ov_links"):
            for short, name in LINKS + (CROSS if cfg.is_encoder_decoder else []) + output_end(cfg):
                spec = registry.spec(name)
                st.page_link(registry.page_path(spec), label=t("ov.link", block=t("dg.short." + short), page=t(spec.title)),
                             icon=":material/arrow_forward:")
        st.subheader(t("ov.output." + ("encoder_only" if cfg.is_encoder_only else
                                       "encoder_decoder" if cfg.is_translator else "lm")))
    return right
