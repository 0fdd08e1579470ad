"""Page: per-head statistics (entropy, distance, self, previous/first/last token, punctuation) on this
text or over a corpus, roles with their evidence, grids per block, the attention-sink grids of this text;
a click opens the head on the attention page."""
import functools

import numpy as np
import streamlit as st

from viz_explorer.server import cached, corpus_jobs, threads
from viz_explorer.kit import callbacks
from viz_explorer.kit import context, corpus_input, corpus_panel
from viz_explorer.kit import registry, widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer import export
from viz_transformer.training import corpora
from viz_transformer.plots import heatmaps
from viz_transformer.plots import summary_figures
from viz_transformer.analysis import piece_labels
from viz_transformer.analysis import sinks
from viz_transformer.analysis import summaries
from viz_transformer.analysis import corpus_ray
from viz_transformer.core.hook_names import available_blocks, n_layers, per_head

ctx = context.need_run()
hm, cfg, path = ctx.hm, ctx.hm.cfg, str(ctx.path)
st.title(t("hs.title"))
widgets.intro("hs")

source = st.segmented_control(t("hs.source"), ["text", "builtin", "own"], default="text", required=True,
                              key="hs_source", format_func=in_language(callbacks.label("hs.source.")))
texts = None
if source == "builtin":
    lang = corpora.for_model(cfg)
    texts = corpora.load(lang)
    st.caption(t("hs.builtin_help", n=len(texts), lang=t(f"hs.lang.{lang}")))
elif source == "own":
    texts = corpus_input.own_corpus("hs")
    if texts is None:
        st.stop()

if texts is None:
    df = cached.head_stats(path, ctx.stamp, ctx.text).copy()
    df["n_sentences"] = 1
else:
    key = corpus_jobs.result_key("head_stats", path, ctx.stamp, texts, {})
    df = corpus_panel.result(key, len(texts), functools.partial(summaries.corpus_head_stats, hm, texts, workers=threads.cores()),
                             t("hs.run", n=len(texts)), "hs",
                             corpus_jobs.ray_form(corpus_ray.head_stats_on_ray, path, texts))
    if df is None:
        if not corpus_panel.running(key):
            st.info(t("hs.not_yet"))
        st.stop()
st.caption(t("hs.n", n=int(df["n_sentences"].iloc[0])))

def _evidence(kind: str, stat: str, value: float, most: float) -> str:
    """summaries.head_roles' structured evidence in the session's language."""
    if kind == "broad":
        return t("hs.ev.broad", v=f"{value:.2f}", max=f"{most:.2f}")
    return t(f"hs.ev.{kind}", stat=t(f"hs.stat.{stat}"), v=f"{value:.2f}")


threshold = st.slider(t("hs.threshold"), 0.2, 0.9, summaries.ROLE_THRESHOLD, 0.05, key="hs_threshold",
                      help=t("hs.threshold_help"))
table = summaries.head_roles(df, threshold)
shown = table.assign(block=[widgets.block_label(b) for b in table["block"]], role=[t(f"hs.role.{r}") if r else "" for r in table["role"]],
                     evidence=[_evidence(*e) for e in zip(table["evidence_kind"], table["evidence_stat"],
                                                          table["evidence_value"], table["evidence_max"])])
config = {c: st.column_config.NumberColumn(t(f"hs.stat.{c}"), format="%.3f") for c in summaries.STATS}
# which head and what it does first, pinned (px): at 1400 px they fit beside the sidebar; the statistics scroll
WIDTHS = {"block": 230, "layer": 50, "head": 50, "role": 120, "evidence": 290}
config.update({c: st.column_config.Column(t(f"ko.col.{c}"), width=WIDTHS[c], pinned=True) for c in ("block", "layer", "head")})
config.update({c: st.column_config.Column(t(f"hs.col.{c}"), width=WIDTHS[c], pinned=True) for c in ("role", "evidence")})
config["n_sentences"] = st.column_config.Column(t("hs.col.n_sentences"))
st.dataframe(shown, hide_index=True, key="hs_table", column_config=config,
             column_order=[*WIDTHS, *summaries.STATS, "n_sentences"])
st.download_button(t("hs.csv"), data=export.csv_bytes(table), file_name=f"{ctx.name}-head-stats.csv", mime="text/csv",
                   key="hs_csv", on_click="ignore", icon=":material/table:")
with st.expander(t("hs.defs")):
    st.markdown("\n".join(f"- **{t('hs.stat.' + k)}** (`{k}`): {widgets.md_escape(t('hs.def.' + k))}"
                          for k in summaries.STATS))

stat = st.selectbox(t("hs.stat"), list(summaries.STATS), key="hs_stat", format_func=in_language(callbacks.label("hs.stat.")))
values = table[stat].to_numpy(dtype=float)
zmax = 1.0 if stat not in ("entropy", "mean_distance", "max_entropy") else (        # one scale for every block's grid
    float(np.nanmax(values)) if np.isfinite(values).any() else None)
for block in available_blocks(cfg):
    grid = per_head(table, block, stat, n_layers(cfg, block), cfg.n_heads)
    if not grid.isfinite().any():          # e.g. previous token in cross-attention: a note, not a blank grid
        why = "hs.no_grid.cross" if block == "decoder.cross_attn" else "hs.no_grid"
        st.caption(t(why, stat=t(f"hs.stat.{stat}"), block=widgets.block_label(block)))
        continue
    widgets.show(heatmaps.head_grid(grid, t("hs.grid_title", block=widgets.block_label(block), stat=t(f"hs.stat.{stat}")),
                                 t("axis.layer"), t("axis.head"), t(f"hs.stat.{stat}"), limit=zmax, hover=t("hs.grid_hover"),
                                 signed=False),
                 key=f"hs_grid_{block}", on_select=callbacks.open_stat(block), selection_mode="points")

# -- attention sinks: each head's share on the first position, on this text --------------------------------
st.subheader(t("hs.sink"))
st.caption(t("hs.sink_caption"))
for block in available_blocks(cfg):
    df_sink = cached.sink_shares(path, ctx.stamp, ctx.text, block)
    keys = piece_labels.block_pieces(ctx.run, block)[1]
    top = sinks.strongest(df_sink)
    if top is not None:
        other = int(top["top_other"])
        st.caption(t("hs.sink_strongest", layer=int(top["layer"]), head=int(top["head"]), share=f"{top['first_share']:.0%}",
                     piece=widgets.md_escape(keys[0]), k=other, other=widgets.md_escape(keys[other]),
                     other_share=f"{top['top_other_share']:.0%}"))
    widgets.show(summary_figures.sink_grid(per_head(df_sink, block, "first_share", n_layers(cfg, block), cfg.n_heads),
                                           t("hs.sink_title", block=widgets.block_label(block), piece=keys[0]),
                                           t("axis.layer"), t("axis.head"), t("hs.sink_cb"), hover=t("hs.grid_hover")),
                 key=f"hs_sink_{block}", on_select=callbacks.open_stat(block, f"hs_sink_{block}"), selection_mode="points")

if cfg.is_encoder_only:         # BERT's other resting place: the [SEP] pieces (Clark et al. 2019)
    keys = ctx.run.src_pieces
    seps = [i for i, x in enumerate(ctx.run.src_ids) if x in ctx.hm.tokenizer.specials and i > 0]
    if seps:
        grid = sinks.key_shares(ctx.run.cache, "encoder.self_attn", cfg.n_encoder_layers, seps)
        widgets.show(summary_figures.sink_grid(grid, t("hs.sep_title", piece=keys[seps[-1]], n=len(seps)),
                                               t("axis.layer"), t("axis.head"), t("hs.sep_cb"), hover=t("hs.grid_hover")),
                     key="hs_sep", on_select=callbacks.open_stat("encoder.self_attn", "hs_sep"), selection_mode="points")

opened = st.session_state.pop("hs_open", None)
if opened is not None:        # the attention page reads its pickers from these keys
    st.session_state["at_block"], st.session_state["at_layer"], st.session_state["at_head"] = opened
    st.switch_page(registry.page_path(registry.spec("attention")))
