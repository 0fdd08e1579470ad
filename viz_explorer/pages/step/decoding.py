"""Page: generation one token at a time (greedy, sampling, beam), with what each step looked at."""
import time

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import callbacks
from viz_explorer.kit import confidence_note
from viz_explorer.kit import context
from viz_explorer.pages.step import lens_table
from viz_explorer.pages.step import decoding_state
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import alignment
from viz_transformer.analysis import patterns
from viz_transformer.analysis import decoding_steps
from viz_transformer.plots import heatmaps
from viz_transformer.plots import decoding_figures
from viz_transformer.plots.numbers import fmt_prob
from viz_transformer.run.decode_settings import DecodeSettings

ctx = context.need_run()
hm, cfg = ctx.hm, ctx.hm.cfg
st.title(t("dc.title"))
widgets.needs_decoder(cfg, "nav.decoding")
st.caption(t("dc.intro." + ("encoder_decoder" if cfg.is_encoder_decoder else "sequence" if cfg.is_translator else "lm")))
widgets.rows_note(ctx.run)
widgets.formula("dc")

c = st.columns([2, 2, 1])
strategy = c[0].segmented_control(t("dc.strategy"), ["greedy", "sample", "beam"], default="greedy", required=True,
                                  format_func=in_language(callbacks.label("dc.")), key="dc_strategy")
params = {"strategy": strategy, "max_new_tokens": c[1].slider(t("dc.max_new"), 1, 60, 20, key="dc_max_new")}
layer = widgets.select(c[2], t("dc.layer"), list(range(cfg.n_decoder_layers)), "dc_layer")
if strategy == "sample":
    c = st.columns(4)
    params.update(temperature=c[0].slider(t("dc.temperature"), 0.1, 2.0, 1.0, 0.05, key="dc_temp"),
                  top_k=int(c[1].number_input(t("dc.top_k"), 0, cfg.out_vocab, 0, key="dc_top_k")),
                  top_p=c[2].slider(t("dc.top_p"), 0.05, 1.0, 1.0, 0.05, key="dc_top_p"),
                  seed=int(c[3].number_input(t("dc.seed"), 0, 2**31 - 1, 0, key="dc_seed")))
elif strategy == "beam":
    params.update(beam_width=st.slider(t("dc.width"), 1, 8, min(cfg.num_beams, 8), key="dc_width"))   # the generation config's

try:
    with st.spinner(t("dc.running")):
        settings = DecodeSettings(**params)
        tr = cached.trace(str(ctx.path), ctx.stamp, ctx.text, settings)
except ValueError as e:            # the library's limits (e.g. a value set through the URL or state)
    st.error(str(e))
    st.stop()
n = len(tr.steps)
if tr.n_cut and tr.n_cut != ctx.run.n_cut:     # an LM's prompt leaves room for the new tokens
    st.warning(t("dc.cut", n=tr.n_cut, new=params["max_new_tokens"]))
decoding_state.reset_steps_if_changed((ctx.name, ctx.stamp, ctx.text, tuple(sorted(params.items()))))
i = st.session_state["dc_step"] = min(st.session_state.get("dc_step", 0), n)

b = st.columns(4)
b[0].button(t("dc.reset"), on_click=decoding_state.set_step, args=(0,), disabled=i == 0, key="dc_reset",
            icon=":material/first_page:")
b[1].button(t("dc.back"), on_click=decoding_state.set_step, args=(i - 1,), disabled=i == 0, key="dc_back",
            icon=":material/chevron_left:")
b[2].button(t("dc.next"), on_click=decoding_state.set_step, args=(i + 1,), disabled=i >= n, key="dc_next", type="primary",
            icon=":material/chevron_right:", icon_position="right")
playing = st.session_state["dc_playing"] = st.session_state.get("dc_playing", False) and i < n   # ended: Play again
widgets.play_pause(b[3], playing, "dc", decoding_state.play, decoding_state.pause, disabled=i >= n)
st.progress(i / max(n, 1), text=t("dc.progress", i=i, n=n))

st.markdown(f"**{t('dc.sequence')}**")
widgets.output(decoding_steps.sequence_text(tr, i), "sequence")
if i == 0:
    st.info(t("dc.start"))
else:
    s = tr.steps[i - 1]
    query = decoding_steps.step_query(tr, i - 1)
    row = decoding_steps.step_label(tr, i - 1)            # the row being decoded: "▁an → ▁engineer"
    st.markdown(widgets.md_escape(t("dc.chosen", i=i, query=query, piece=s.piece, p=fmt_prob(s.prob))))
    chosen = next((j for j, cand in enumerate(s.candidates) if cand.id == s.token_id), None)
    keys = max(len(tr.src_pieces) if cfg.is_encoder_decoder else 0, len(decoding_steps.step_keys(tr, i - 1)))
    (left, right), width = widgets.figure_columns(2, cfg.n_heads, keys)
    with left:
        widgets.show(decoding_figures.probability_bars([cand.piece for cand in s.candidates], [cand.prob for cand in s.candidates],
                                            t("dc.cands_title", i=i), chosen, t("axis.probability"),
                                            t("axis.candidate"), t("cb.prob"), width=width), key="dc_cands")
    with right:
        cross, own = (patterns.hook_name(b, layer, "hook_pattern") for b in ("decoder.cross_attn", "decoder.self_attn"))
        if cfg.is_encoder_decoder:
            widgets.show(heatmaps.head_rows(s.attention[cross], tr.src_pieces,
                                         t("dc.cross_title", query=row, layer=layer), t("axis.source"),
                                         t("axis.head"), t("cb.weight"), width=width), key="dc_cross")
            reads = alignment.reads_by_piece(alignment.step_cross_weights(s, cfg.n_decoder_layers), tr.src_pieces)
            st.markdown(widgets.md_escape(t("dc.reads", heads=cfg.n_decoder_layers * cfg.n_heads,
                                            items=" · ".join(f"{p} × {n}" for p, n in reads))))
        widgets.show(heatmaps.head_rows(s.attention[own],
                                     decoding_steps.step_keys(tr, i - 1), t("dc.self_title", query=row, layer=layer),
                                     t("axis.so_far"), t("axis.head"), t("cb.weight"), width=width), key="dc_self")
    lens_table.step_lens(ctx, tr, i, settings)          # this step read after every layer (logit lens)
    if strategy == "beam":
        st.subheader(t("dc.beams"))
        widgets.show(decoding_figures.beam_tree(decoding_steps.beam_links(tr, upto=i), t("dc.beam_title", i=i), t("axis.step"),
                                     t("axis.beam"), t("cb.logp"), t("dc.extended"), t("dc.dropped"),
                                     t("dc.finished")), key="dc_beams")
if i == n and n:
    st.success(widgets.md_escape(t("dc.done", text=hm.tokenizer.decode(tr.output_ids))))
    confidence_note.of_trace(hm, ctx.text, tr)

if playing:      # advance one step per rerun until the end
    if i < n:
        time.sleep(0.8)
        st.session_state["dc_step"] = i + 1
        st.rerun()
    st.session_state["dc_playing"] = False
