"""Page: knock attention heads out and compare the output, its token probabilities and the attention;
rank every head by what knocking it out alone does. On an encoder-only model (it generates nothing): the change
in log p of the masked-LM head's top piece at the first [MASK] (run/blank_effect.py)."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import callbacks
from viz_explorer.kit import confidence_note
from viz_explorer.kit import context
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import patterns, piece_labels, windows
from viz_transformer.run import forced
from viz_transformer.run import blank_effect, interventions
from viz_transformer.plots import charts, heatmaps
from viz_transformer.run.logit_rules import never_generated
from viz_transformer.core.hook_names import block_prefix, parse_prefix, per_head

ctx = context.need_run()
hm, cfg, run = ctx.hm, ctx.hm.cfg, ctx.run
path = str(ctx.path)
st.title(t("ko.title"))
target = blank_effect.blank_target(hm, run) if cfg.is_encoder_only else None
if cfg.is_encoder_only and target is None:
    mask = getattr(hm.tokenizer, "mask_token", None) or "[MASK]"
    st.info(t("ko.blank_none", mask=mask) if cfg.head == "mlm" else t("ko.blank_no_head"), icon=":material/info:")
    st.stop()
widgets.intro("ko", latex="ko.blank" if target else None)
if target is not None:
    st.caption(t("ko.blank_what", piece=hm.tokenizer.pieces([target[1]])[0], i=target[0]))
widgets.rows_note(run)
blocks = patterns.available_blocks(cfg)


def _options(block: str) -> list[str]:
    return [callbacks.ko_cell(layer, h) for layer in range(patterns.n_layers(cfg, block)) for h in range(cfg.n_heads)]


mode = st.segmented_control(t("ko.mode"), list(interventions.MODES), default="zero", required=True, key="ko_mode",
                            format_func=in_language(callbacks.label("ko.mode.")), help=t("ko.mode_help"))
heads = []
for block in blocks:
    key, options = f"ko_pick_{block}", _options(block)
    st.session_state[key] = [o for o in (st.session_state.get(key) or []) if o in options]   # another checkpoint
    picked = st.pills(t("ko.pick", block=widgets.block_label(block)), options, selection_mode="multi", key=key)
    heads += [(block_prefix(block, i // cfg.n_heads), i % cfg.n_heads) for i in map(options.index, picked)]
    c = st.columns(patterns.n_layers(cfg, block) + 4)
    for layer in range(patterns.n_layers(cfg, block)):
        c[layer].button(t("ko.all_layer", layer=layer), key=f"ko_all_{block}_{layer}", on_click=callbacks.ko_add,
                        args=(block, [(layer, h) for h in range(cfg.n_heads)]), help=t("ko.all_layer_help", layer=layer))
total = sum(patterns.n_layers(cfg, b) for b in blocks) * cfg.n_heads
c = st.columns([4, 1])
c[0].caption(t("ko.n_off", n=len(heads), total=total) if heads else t("ko.none_off"))
c[1].button(t("ko.clear"), key="ko_clear", on_click=callbacks.ko_clear, args=(blocks,), disabled=not heads)

key = tuple(sorted(heads))
try:
    after, after_logits = cached.ablated(path, ctx.stamp, ctx.text, key, mode)
except ValueError as e:
    st.error(str(e))
    st.stop()

if target is not None:           # encoder-only: the log p of the top piece at the blank, before and after
    before_lp, after_lp = (blank_effect.logprob_at(lg, target) for lg in (run.logits, after_logits))
    c = st.columns(3)
    c[0].metric(t("ko.blank_before"), f"{before_lp:.3f}")
    c[1].metric(t("ko.blank_after"), f"{after_lp:.3f}", f"{after_lp - before_lp:+.3f}")
    c[2].caption(t("ko.blank_top_after", piece=hm.tokenizer.pieces([int(after_logits[target[0]].argmax())])[0]))
else:
    left, right = st.columns(2)
    for where, title, r in ((left, "ko.before", run), (right, "ko.after", after)):
        where.markdown(f"**{t(title)}**")
        widgets.output(r.output or t("ko.empty_output"), title, where)
        confidence_note.of_run(hm, r, where)

    ids, start = forced.output_labels(run)
    banned = never_generated(hm.tokenizer)
    before_p = forced.token_probabilities(run.logits, ids, start, banned)
    after_p = forced.token_probabilities(after_logits, ids, start, banned)
    widgets.show(charts.before_after_bars(hm.tokenizer.pieces(ids), before_p, after_p, t("ko.probs_title"),
                                         t("ko.series_before"), t("ko.series_after"), t("ov.col.piece"),
                                         t("axis.probability")), key="ko_probs")
    st.caption(t("ko.probs_help"))

# -- the attention the remaining heads computed ----------------------------------------------------
st.subheader(t("ko.attention"))
block, layer, head = widgets.block_layer_head(st.columns(3), cfg, "ko")
if (block_prefix(block, layer), head) in heads:
    st.caption(t("ko.is_off", mode=t(f"ko.mode.{mode}")))
q_pieces, k_pieces = piece_labels.query_labels(after, block), piece_labels.block_pieces(after, block)[1]
(qa, qb), (ka, kb) = widgets.window(len(q_pieces), len(k_pieces), "ko_window", pieces=k_pieces)   # a long text
mat = windows.head_window(after.cache, block, layer, head, (qa, qb), (ka, kb))
widgets.show(heatmaps.attention_heatmap(mat, q_pieces[qa:qb], k_pieces[ka:kb], t("ko.attention_title",
                                        block=widgets.block_label(block), layer=layer, head=widgets.head_label(head)),
                                        t("axis.key"), widgets.query_axis(block), t("cb.weight"), qa, ka,
                                        zmax=widgets.window_zmax(mat, len(k_pieces))), key="ko_attention")

# -- ranking ----------------------------------------------------------------------------------------
st.subheader(t("ko.rank"))
st.caption(t("ko.rank_help_blank" if target else "ko.rank_help"))
rank_key = (path, ctx.stamp, ctx.text, mode)
if st.button(t("ko.rank_run"), key="ko_rank", type="primary", icon=":material/leaderboard:"):
    bar = st.progress(0.0, text=t("ko.rank_progress", done=0, total="…"))
    progress = lambda done, n: bar.progress(done / n, text=t("ko.rank_progress", done=done, total=n))  # noqa: E731
    means = cached.head_means(path, ctx.stamp, ctx.text) if mode == "mean" else None
    # kept in the session (not st.cache_*: the progress bar inside would be replayed on a cache hit)
    rank = (lambda: blank_effect.rank_heads_at_blank(hm, ctx.text, mode, progress, means)) if target else \
        (lambda: interventions.rank_heads(hm, ctx.run.input, mode, progress, means))
    st.session_state["ko_ranking"] = (rank_key, rank())
    bar.empty()
ranked = st.session_state.get("ko_ranking")
if ranked is not None and ranked[0] == rank_key:
    df = ranked[1].sort_values("delta_logprob", kind="stable", ignore_index=True)     # the largest drop first
    cols = {"block": t("ko.col.block"), "layer": t("ko.col.layer"), "head": t("ko.col.head"),
            "delta_logprob": t("ko.col.delta"),
            "output_changed": t("ko.col.blank_changed" if target else "ko.col.changed")}
    shown = df.assign(block=[widgets.prefix_label(p) for p in df["block"]])
    st.dataframe(shown.rename(columns=cols), hide_index=True, key="ko_table")
    limit = float(df["delta_logprob"].abs().max())                  # one colour scale for every block's grid

    for block in blocks:
        grid = per_head(df, block, "delta_logprob", patterns.n_layers(cfg, block), cfg.n_heads)
        off = [(parse_prefix(p)[1], h) for p, h in heads if parse_prefix(p)[0] == block]
        widgets.show(heatmaps.head_grid(grid, t("ko.rank_title", block=widgets.block_label(block), mode=t(f"ko.mode.{mode}")),
                                     t("axis.layer"), t("axis.head"), t("cb.delta"), marked=off,
                                     hover=t("ko.rank_hover"), limit=limit),
                     key=f"ko_grid_{block}", on_select=callbacks.ko_pick(block), selection_mode="points")
