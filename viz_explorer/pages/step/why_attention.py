"""Page: why a head attends where it does. A tapped cell's score split into query part × key part terms
(analysis.score_terms on the text's term run, one cell at a time), beside the row's runner-up key; which heads write
an output word (logit_terms as a layer × head grid); the head's circuits from its weights alone."""
import streamlit as st

from viz_explorer.kit import callbacks, context, widgets
from viz_explorer.kit.strings import in_language, t
from viz_explorer.kit.why_words import group_label, logit_rows, logit_story, score_story
from viz_explorer.server import cached
from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.analysis import why_attention as why
from viz_transformer.analysis.score_terms import logit_terms, score_terms
from viz_transformer.plots import charts, heatmaps, why_figures

ctx = context.need_run()
run, cfg, hm = ctx.run, ctx.hm.cfg, ctx.hm
st.title(t("wy.title"))
widgets.intro("wy")
if cfg.qk_norm:
    st.info(t("wy.qk_norm"))
    st.stop()

seen = (str(ctx.path), ctx.text)                  # another text or model: its own first cell, not the last one's
if st.session_state.get("wy_for", seen) not in (seen, None):
    for name in ("wy_q", "wy_k", "wy_step", "wy_versus"):
        st.session_state.pop(name, None)
st.session_state["wy_for"] = seen
c = st.columns([3, 1, 1])
block, layer, head = widgets.block_layer_head(c, cfg, "wy", default_block="decoder.cross_attn")
pat = patterns.head_pattern(run.cache, block, layer, head)                 # [queries, keys]
q_pieces, k_pieces = piece_labels.block_pieces(run, block)
q_labels = piece_labels.query_labels(run, block)
T, S = pat.shape
c = st.columns(2)
first = min(1, T - 1) if block == "decoder.self_attn" else 0       # a causal row 0 sees one key: nothing to compare
query = widgets.select(c[0], t("wy.query"), list(range(T)), "wy_q", first,
                       format_func=callbacks.numbered(q_labels), on_change=callbacks.why_row)
key = widgets.select(c[1], t("wy.key"), list(range(S)), "wy_k", int(pat[query].argmax()),
                     format_func=callbacks.numbered(k_pieces))

widgets.show_cell(T, S, "wy_window", (query, key))
(qa, qb), (ka, kb) = widgets.window(T, S, "wy_window", pieces=k_pieces)
fig = heatmaps.attention_heatmap(pat[qa:qb, ka:kb], q_labels[qa:qb], k_pieces[ka:kb],
                                 t("wy.heatmap_title", block=widgets.block_label(block), layer=layer, head=head),
                                 t("axis.key"), widgets.query_axis(block), colorbar=t("cb.weight"), q_start=qa,
                                 k_start=ka, zmax=widgets.window_zmax(pat[qa:qb, ka:kb], S))
widgets.show(why_figures.pickable(fig, qb - qa, kb - ka, qa, ka, (query, key)), key="wy_heatmap",
             on_select=callbacks.why_cell(), selection_mode="points")
st.caption(t("wy.tap_note"))

terms_run = cached.term_run(str(ctx.path), ctx.stamp, ctx.text, tuple(run.output_ids))
tabs = widgets.lazy_tabs("wy")

with tabs["score"]:
    if tabs["score"].open:
        detail = st.radio(t("wy.detail"), ["kind", "layer"], key="wy_detail", horizontal=True,
                          format_func=in_language(callbacks.label("wy.detail.")), help=t("wy.detail_help"))
        cell = score_terms(hm, terms_run, block, layer, head, query, key)
        other = why.runner_up(pat[query], key)
        if pat[query, key] == 0 and pat[query].sum() > 0:
            st.caption(t("wy.masked"))
        shown = [(key, cell)] + ([(other, score_terms(hm, terms_run, block, layer, head, query, other))] if other >= 0 else [])
        grouped = [why.group_terms(x, by_layer=detail == "layer") for _, x in shown]
        cols, width = widgets.figure_columns(len(shown), len(grouped[0].query_groups) + 1,
                                             max(len(g.key_groups) for g in grouped) + 1,
                                             colorbars=(t("wy.cb.term"),))
        for where, (k, x), g in zip(cols, shown, grouped):
            with where:
                widgets.show(why_figures.terms_heatmap(
                    g.matrix, [group_label(n) for n in g.query_groups], [group_label(n) for n in g.key_groups],
                    t("wy.g.sum"), t("wy.terms_title", qp=q_pieces[query], kp=k_pieces[k], score=x.score,
                                     weight=float(pat[query, k])),
                    t("wy.axis.key_parts"), t("wy.axis.query_parts"), t("wy.cb.term"), width=width))
                st.markdown(score_story(hm, x, q_pieces[query], k_pieces[k]))
        if other < 0:
            st.caption(t("wy.no_runner_up"))
        else:
            win, lose = sorted(shown, key=lambda kx: -float(pat[query, kx[0]]))
            gap = why.key_group_gap(win[1], lose[1])
            a, b = why.key_group_values(win[1]), why.key_group_values(lose[1])
            widgets.show(charts.grouped_bars(
                [group_label(g) for g in gap], {k_pieces[win[0]]: [a.get(g, 0.0) for g in gap],
                                                k_pieces[lose[0]]: [b.get(g, 0.0) for g in gap]},
                t("wy.gap_title", win=k_pieces[win[0]], other=k_pieces[lose[0]]), t("wy.axis.key_parts"),
                t("wy.axis.score")))
            top = max(gap, key=lambda g: gap[g])
            st.markdown(t("wy.gap", win=widgets.md_escape(k_pieces[win[0]]), other=widgets.md_escape(k_pieces[lose[0]]),
                          gap=win[1].score - lose[1].score, w_win=float(pat[query, win[0]]),
                          w_other=float(pat[query, lose[0]]), group=group_label(top), value=gap[top]))
        st.caption(t("wy.check", total=cell.total(), score=cell.score))

with tabs["logit"]:
    if tabs["logit"].open:
        if cfg.is_encoder_only or not run.output_ids:
            st.info(t("wy.no_output"))
        else:
            out = run.tgt_pieces[run.prompt_len:]
            steps = list(range(1, len(out) + 1))
            here = query - run.prompt_len + 2 if block.startswith("decoder") else 1     # the word this row writes
            c = st.columns(2)
            step = widgets.select(c[0], t("wy.step"), steps, "wy_step", here if here in steps else 1,
                                  format_func=callbacks.numbered([""] + out))
            lt = logit_terms(hm, terms_run, step)
            rivals = why.rivals(terms_run.logits[lt.row], lt.token)
            versus = widgets.select(c[1], t("wy.versus"), [None] + rivals, "wy_versus",
                                    format_func=in_language(callbacks.piece_or(t("wy.versus_none"), hm.tokenizer)))
            vs = logit_terms(hm, terms_run, step, token=versus) if versus is not None else None
            grid = why.head_grid(lt, cfg.n_heads)
            values = grid.values - why.head_grid(vs, cfg.n_heads).values if vs is not None else grid.values
            piece, rival = out[step - 1], hm.tokenizer.piece(versus) if versus is not None else None
            widgets.show(why_figures.logit_grid(
                values, logit_rows(grid.rows), t("wy.grid_title_vs" if vs else "wy.grid_title", piece=piece,
                                                 other=rival or ""),
                t("axis.layer"), t("axis.head"), t("wy.cb.logit"), t("wy.grid_hover")), key="wy_grid")
            st.markdown(logit_story(lt, vs, grid.rows, values, piece, rival))
            st.caption(t("wy.logit_note"))

with tabs["circuits"]:
    if tabs["circuits"].open:
        st.caption(t("wy.circuits_intro"))
        circ = cached.circuits(str(ctx.path), ctx.stamp, block, layer, head)
        c = st.columns(2)
        for where, k in zip(c, (1, 10)):
            where.metric(t("wy.copy", k=k), t("wy.copy_value", share=f"{circ.copy_share(k):.0%}", n=len(circ.tokens)),
                         help=t("wy.copy_help"))
        if circ.positions is None:
            st.caption(t("wy.no_qk_pos." + ("rope" if cfg.positional == "rope" else "relative")))
        else:
            n = circ.positions.shape[0]
            widgets.show(heatmaps.values_heatmap(circ.positions, [str(i) for i in range(n)], [str(i) for i in range(n)],
                                                 t("wy.qk_pos_title"), t("wy.axis.k_pos"), t("wy.axis.q_pos"),
                                                 t("wy.cb.score")))
