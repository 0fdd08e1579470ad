"""Page: padding, causal, prefix-LM and cross-attention masks, and what each head applied."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.server import defaults
from viz_explorer.kit import context
from viz_explorer.kit import on_request
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.analysis import mask_examples, patterns, piece_labels
from viz_transformer.run import capture
from viz_transformer.plots import figure_rules, heatmaps

ctx = context.need_run()
run, cfg = ctx.run, ctx.hm.cfg
st.title(t("mk.title"))
widgets.intro("mk")
widgets.rows_note(run)
mask_kw = dict(xlabel=t("axis.key"), ylabel=t("axis.query"), allowed=t("mask.allowed"), blocked=t("mask.blocked"),
               colorbar=t("cb.mask"))
tabs = widgets.lazy_tabs("mk")        # only the open tab runs and is drawn

with tabs["padding"]:
    if tabs["padding"].open:
        # -- padding (and, for a translator, the cross-attention mask) from a real two-sentence batch ---------
        st.subheader(t("mk.padding"))
        st.caption(t("mk.padding_help"))
        suggested = capture.most_different(ctx.hm, ctx.text, defaults.SECOND[ctx.kind])
        other = st.text_input(t("mk.other"), value=suggested, key=f"mk_other_{ctx.kind}_{hash(ctx.text)}")
        pb = None
        if cfg.pad_id < 0:
            st.info(t("mk.no_pad"))
        elif other.strip() and on_request.asked(ctx.hm, "masks", (ctx.name, ctx.text, other), t("mk.run")):
            with st.spinner(t("sidebar.running")):
                pb = cached.padded(str(ctx.path), ctx.stamp, ctx.text, other)
            row = pb.padded_row
            encoder = cfg.is_encoder_decoder or cfg.is_encoder_only         # the text is the encoder's input
            self_block = "encoder.self_attn" if encoder else "decoder.self_attn"
            hook = patterns.hook_name(self_block, 0, "hook_mask")
            pieces = pb.src_pieces[row] if encoder else pb.tgt_pieces[row]
            if ctx.hm.tokenizer.pieces([cfg.pad_id])[0] not in pieces:
                st.info(t("mk.same_length"))
            widgets.show(heatmaps.mask_heatmap(pb.cache[hook][row, 0], pieces, pieces,
                                            t("mk.padding_title", hook=hook, row=row), **mask_kw))

        st.subheader(t("mk.cross"))
        st.caption(t("mk.cross_help"))
        if not cfg.is_encoder_decoder:
            st.info(t("mk.cross_none_encoder" if cfg.is_encoder_only else "mk.cross_none"))
        elif pb is not None:
            hook = patterns.hook_name("decoder.cross_attn", 0, "hook_mask")
            widgets.show(heatmaps.mask_heatmap(pb.cache[hook][pb.padded_row, 0], pb.tgt_pieces[pb.padded_row],
                                            pb.src_pieces[pb.padded_row],
                                            t("mk.cross_title", hook=hook, row=pb.padded_row),
                                            **mask_kw))

with tabs["causal"]:
    if tabs["causal"].open and cfg.is_encoder_only:
        st.info(t("mk.both_ways"))
    elif tabs["causal"].open:
        # -- causal and prefix-LM over the decoder input --------------------------------------------------
        pieces = run.tgt_pieces
        T = len(pieces)
        seq, p0 = mask_examples.prefix_lm_layout(run)           # the sentence as a prefix LM sees it
        n = min(max(T, len(seq)), figure_rules.max_cells())       # a long text: each figure a window of it
        (left, right), width = widgets.figure_columns(2, n, n)
        with left:
            st.subheader(t("mk.causal"))
            st.caption(t("mk.causal_help"))
            (a, b), _ = widgets.window(T, T, "mk_causal_window", width=width, pieces=pieces)
            widgets.show(heatmaps.mask_heatmap(mask_examples.example_masks(T, 1)["causal"][a:b, a:b], pieces[a:b],
                                               pieces[a:b], t("mk.causal_title"), width=width, q_start=a, k_start=a,
                                               **mask_kw))
        with right:
            st.subheader(t("mk.prefix"))
            st.caption(t("mk.prefix_help"))
            if cfg.architecture == "prefix_lm" and run.prefix_len:     # the mask this model really applied
                st.caption(t("mk.prefix_applied", p=run.prefix_len))
                hook = patterns.hook_name("decoder.self_attn", 0, "hook_mask")
                (a, b), _ = widgets.window(T, T, "mk_prefix_window", width=width, pieces=pieces)
                widgets.show(heatmaps.mask_heatmap(run.cache[hook][0, 0, a:b, a:b], pieces[a:b], pieces[a:b],
                                                   t("mk.mask_title", hook=hook), width=width, q_start=a, k_start=a,
                                                   **mask_kw), key="mk_prefix_fig")
            else:                     # prefix = [begin] + source + [sep]
                st.caption(t("mk.prefix_layout" if cfg.is_translator else "mk.prefix_layout_lm", p=p0))
                state = st.session_state
                if state.get("mk_prefix_for") != seq:          # a new sentence: its source again (a link: its own)
                    if state.get("mk_prefix_for") is not None or "mk_prefix" not in state:
                        state["mk_prefix"] = p0
                    state["mk_prefix_for"] = seq
                state["mk_prefix"] = min(max(1, state["mk_prefix"]), len(seq))
                p = st.slider(t("mk.prefix_len"), 1, len(seq), key="mk_prefix") if len(seq) > 1 else 1
                (a, b), _ = widgets.window(len(seq), len(seq), "mk_prefix_window", width=width, pieces=seq)
                widgets.show(heatmaps.mask_heatmap(mask_examples.example_masks(len(seq), p)["prefix_lm"][a:b, a:b],
                                                   seq[a:b], seq[a:b], t("mk.prefix_title", p=p), width=width,
                                                   q_start=a, k_start=a, **mask_kw), key="mk_prefix_fig")

with tabs["applied"]:
    if tabs["applied"].open:
        # -- the mask each head applied in your run, and its effect ----------------------------------------
        st.subheader(t("mk.applied"))
        st.caption(t("mk.applied_help"))
        c = st.columns([3, 1, 1])
        block, layer, head = widgets.block_layer_head(c, cfg, "mk", default_block="decoder.self_attn")
        q_pieces, k_pieces = piece_labels.query_labels(run, block), piece_labels.block_pieces(run, block)[1]
        yq = widgets.query_axis(block)
        (qa, qb), (ka, kb) = widgets.window(len(q_pieces), len(k_pieces), "mk_window", pieces=k_pieces)
        mask = run.cache[patterns.hook_name(block, layer, "hook_mask")][0, 0]
        scores = run.cache[patterns.hook_name(block, layer, "hook_scores")][0, head]
        pattern = run.cache[patterns.hook_name(block, layer, "hook_pattern")][0, head]
        qp, kp = q_pieces[qa:qb], k_pieces[ka:kb]
        ql, kl = heatmaps.labels(qp, qa), heatmaps.labels(kp, ka)
        widgets.show(heatmaps.mask_heatmap(mask[qa:qb, ka:kb], qp, kp, t("mk.mask_title",
                                        hook=patterns.hook_name(block, layer, "hook_mask")), q_start=qa, k_start=ka,
                                        **{**mask_kw, "ylabel": yq}))
        cols, width = widgets.figure_columns(3, len(qp), len(kp))
        with cols[0]:
            widgets.show(heatmaps.values_heatmap(scores[qa:qb, ka:kb], ql, kl, t("mk.before", head=head), t("axis.key"),
                                              yq, t("cb.score"), width=width), key="mk_before")
        with cols[1]:
            widgets.show(heatmaps.values_heatmap(mask_examples.masked_scores(scores, mask)[qa:qb, ka:kb], ql, kl,
                                              t("mk.after", head=head), t("axis.key"), yq, t("cb.score"),
                                              width=width), key="mk_after")
        with cols[2]:
            widgets.show(heatmaps.attention_heatmap(pattern[qa:qb, ka:kb], qp, kp, t("mk.pattern", head=head),
                                                 t("axis.key"), yq, t("cb.weight"), qa, ka, width=width),
                         key="mk_pattern")
