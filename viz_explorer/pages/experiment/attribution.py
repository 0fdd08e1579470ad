"""Page: attention beside attribution. For one output step, six ways of scoring the input pieces (attention,
rollout, value norm, grad × input, integrated gradients, occlusion), each method's Kendall τ with occlusion, the
pieces it ranks most unlike occlusion, and τ over a corpus (analysis/attribution.py)."""
import functools

import numpy as np
import pandas as pd
import streamlit as st

from viz_explorer.kit import callbacks
from viz_explorer.kit import context, corpus_input, corpus_panel
from viz_explorer.kit import on_request
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_explorer.server import cached, corpus_jobs, threads
from viz_transformer.analysis import attribution as AA
from viz_transformer.analysis import corpus_ray
from viz_transformer.plots import attribution_figures
from viz_transformer.run import attribution as grads
from viz_transformer.run.forced import output_labels
from viz_transformer.training import corpora

N_BUILTIN = 200          # held-out sentences of the built-in corpus the "how often" pass reads

ctx = context.need_run()
hm, cfg, run, path = ctx.hm, ctx.hm.cfg, ctx.run, str(ctx.path)
st.title(t("ab.title"))
widgets.intro("ab")
if cfg.is_encoder_only:
    st.info(t("ab.encoder_only"), icon=":material/info:")
    st.stop()
ids = output_labels(run)[0]
if not ids:
    st.info(t("ab.no_output"), icon=":material/info:")
    st.stop()
names = {m: t(f"ab.m.{m}") for m in AA.METHODS}           # the rows of the figure, in the table's order

c = st.columns([3, 2])
step = c[0].slider(t("ab.step"), 1, len(ids), 1, key="ab_step") if len(ids) > 1 else 1
layers = [-1, *range(cfg.n_decoder_layers)]
layer = c[1].selectbox(t("ab.layer"), layers, key="ab_layer", help=t("ab.layer_help"),
                       format_func=in_language(lambda i: t("ab.layer_mean") if i < 0 else t("ab.layer_one", layer=i)))
layer = None if layer < 0 else layer
piece = hm.tokenizer.pieces([ids[step - 1]])[0]
st.markdown(t("ab.writes", step=step, n=len(ids), piece=widgets.md_escape(piece)))

n_in = AA.n_pieces(run)         # what waits for a click (seconds of work): occlusion and the gradients on a large model
grads_wait = n_in <= grads.MAX_PIECES and (on_request.is_large(hm) or n_in > AA.AUTO_PIECES)      # or a long input,
rollout_wait = not AA.rollout_at_once(cfg, n_in)          # the rollout when it reads too many attention weights
label = t("ab.run_both" if grads_wait and rollout_wait else "ab.run_rollout" if rollout_wait else "ab.run_gradients")
if not (grads_wait or rollout_wait):
    full = True
elif on_request.is_large(hm):
    full = on_request.asked(hm, "attribution", (ctx.name, ctx.text), label)
else:
    asked = st.session_state.setdefault("_ab_asked", set())
    if (ctx.name, ctx.text) not in asked:       # a click, never a value left in session state, starts the work
        if grads_wait:
            st.caption(t("ab.long", n=n_in, auto=AA.AUTO_PIECES))
        st.button(label, key="ab_go", type="primary", icon=":material/play_arrow:",
                  on_click=asked.add, args=((ctx.name, ctx.text),))
    full = (ctx.name, ctx.text) in asked
if rollout_wait and not full:
    st.caption(t("ab.rollout_long", cells=f"{AA.rollout_cells(cfg, n_in) / 1e6:,.0f}",
                 limit=f"{AA.ROLLOUT_CELLS / 1e6:,.0f}"))
gradients, rollout = full or not grads_wait, full or not rollout_wait
try:
    comp = cached.memo().get(("attribution", path, ctx.stamp, ctx.text, step, layer, gradients, rollout),
                             lambda: AA.compare_step(hm, run, step, layer, gradients, reference=gradients, rollout=rollout))
except ValueError as e:
    st.error(str(e))
    st.stop()

pieces = comp.pieces
if comp.capped:
    st.warning(t("ab.capped", n=len(pieces), limit=grads.MAX_PIECES), icon=":material/content_cut:")
else:
    st.caption(t("ab.limit", auto=AA.AUTO_PIECES, limit=grads.MAX_PIECES, steps=grads.IG_STEPS))
_, (ka, kb) = widgets.window(len(comp.scores), len(pieces), "ab_window", pieces=pieces)
widgets.show(attribution_figures.method_rows(
    comp.scores, pieces, names, t("ab.fig_title", step=step, piece=piece), t("ab.axis_pieces"), t("ab.axis_method"),
    t("ab.cb"), t("ab.hover"), marks=comp.different, start=ka, stop=kb), key="ab_rows")
st.caption(t("ab.marks", k=AA.N_DIFFERENT))

if comp.tau:
    best, att = comp.best, comp.different.get("attention", [])
    verdict = t("ab.best", method=names[best], tau=f"{comp.tau[best]:.2f}") if best else t("ab.no_best")
    if att:
        j = att[0]
        r_att, r_occ = AA.ranks(comp.scores["attention"])[j], AA.ranks(comp.scores[AA.REFERENCE])[j]
        verdict += " " + t("ab.attention_misleads", piece=widgets.md_escape(pieces[j]), i=j, a=int(r_att), o=int(r_occ),
                           tau=f"{comp.tau['attention']:.2f}")
    st.markdown(verdict)
    table = pd.DataFrame({"method": [names[m] for m in comp.tau], "tau": list(comp.tau.values()),
                          "different": [", ".join(f"{j}:{pieces[j]}" for j in comp.different[m]) for m in comp.tau]})
    st.dataframe(table, hide_index=True, key="ab_table", column_config={
        "method": st.column_config.Column(t("ab.col.method")),
        "tau": st.column_config.NumberColumn(t("ab.col.tau"), format="%.2f"),
        "different": st.column_config.Column(t("ab.col.different"))})
if comp.ig is not None:
    st.caption(t("ab.ig_error", error=f"{comp.ig.error:+.3f}", gap=f"{comp.ig.gap:.3f}",
                 share=f"{abs(comp.ig.error) / max(abs(comp.ig.gap), 1e-9):.1%}", steps=grads.IG_STEPS))
with st.expander(t("ab.defs")):
    st.markdown(t("ab.defs_md"))

# -- how often: τ over every output step of a corpus -----------------------------------------------------------------
st.subheader(t("ab.often"))
source = st.segmented_control(t("ab.source"), ["builtin", "own"], default=None, key="ab_source",
                              format_func=in_language(callbacks.label("ab.source.")))
if source not in ("builtin", "own"):          # nothing chosen yet: the pass takes minutes, so it is never the default
    st.caption(t("ab.pick_source"))
    st.stop()
if source == "builtin":
    lang = "zh" if cfg.is_translator else "en"
    texts = corpora.load(lang)[:N_BUILTIN]
    st.caption(t("ab.builtin_help", n=len(texts), lang=t(f"hs.lang.{lang}")))
else:
    texts = corpus_input.own_corpus("ab")
    if texts is None:
        st.stop()
key = corpus_jobs.result_key("attribution", path, ctx.stamp, texts, {"layer": layer})
df = corpus_panel.result(key, len(texts), functools.partial(AA.corpus_taus, hm, texts, layer=layer, workers=threads.cores()),
                         t("ab.run_corpus", n=len(texts)), "ab",
                         corpus_jobs.ray_form(corpus_ray.taus_on_ray, path, texts, layer=layer))
if df is None:
    if not corpus_panel.running(key):
        st.info(t("ab.not_yet"))
    st.stop()
summary = AA.tau_summary(df)
taus = {names[m]: df[(df["method"] == m) & (df["layer"] == -1)]["tau"].to_numpy(dtype=float) for m in summary.index}
n_steps = len(df[["sentence", "step"]].drop_duplicates())
widgets.show(attribution_figures.tau_distribution(taus, t("ab.often_title", n=df["sentence"].nunique(), steps=n_steps),
                                                  t("ab.axis_method"), t("ab.col.tau")), key="ab_often")
st.dataframe(summary.reset_index().assign(method=lambda d: [names[m] for m in d["method"]]), hide_index=True,
             key="ab_often_table", column_config={
                 "method": st.column_config.Column(t("ab.col.method")),
                 "steps": st.column_config.NumberColumn(t("ab.col.steps")),
                 "median": st.column_config.NumberColumn(t("ab.col.median"), format="%.2f"),
                 "mean": st.column_config.NumberColumn(t("ab.col.mean"), format="%.2f"),
                 "above_half": st.column_config.NumberColumn(t("ab.col.above_half"), format="percent")})
if np.isfinite(summary["median"]).any():
    top = summary["median"].idxmax()
    st.markdown(t("ab.often_best", method=names[top], median=f"{summary.loc[top, 'median']:.2f}",
                  att=f"{summary.loc['attention', 'median']:.2f}" if "attention" in summary.index else "–"))
