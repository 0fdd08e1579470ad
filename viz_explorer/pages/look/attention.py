"""Page: one head's heatmap (optionally renormalised without the position-0 sink), the model view (all layers ×
heads), the line view, word level."""
import streamlit as st

from viz_explorer.kit import callbacks
from viz_explorer.kit import context
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.analysis import architectures
from viz_transformer.analysis import sinks
from viz_transformer.analysis import windows
from viz_transformer.plots import heatmaps
from viz_transformer.plots import model_figures

TILE = 32          # model-view tile size (cells) above which patterns are max-pooled ...
GRID_CELLS = 144   # ... halved beyond this many heads in all: 24 × 14 tiles are ~70 px wide, 2 px a cell at 32
LINE_WINDOW = 48   # at most this many tokens per column in the line view
MAX_LINES = 300    # per head

ctx = context.need_run()
run, cfg = ctx.run, ctx.hm.cfg
st.title(t("at.title"))
widgets.intro("at")
widgets.rows_note(run)

c = st.columns([3, 1, 2, 1.4])
block, layer, head = widgets.block_layer_head(c, cfg, "at", with_reduce=True)
words = c[3].toggle(t("at.words"), key="at_words", help=t("at.words_help"))
no_sink = st.toggle(t("at.no_sink"), key="at_no_sink", help=t("at.no_sink_help"))
specials = []                      # an encoder-only model's [CLS] and [SEP] (<s>, </s>), which a switch hides
if cfg.is_encoder_only:
    specials = [i for i, x in enumerate(run.src_ids) if x in getattr(ctx.hm.tokenizer, "specials", ())]
no_special = bool(specials) and st.toggle(t("at.no_special"), key="at_no_special", help=t("at.no_special_help"))

n_layers = patterns.n_layers(cfg, block)
q_pieces, k_pieces = piece_labels.block_pieces(run, block)
whole = words or no_special            # word groups and hidden pieces need every row: the layer at once
if whole:
    pat = patterns.layer_patterns(run.cache, block, layer)          # (H, q, k): a long text's layers one at a time
    shown = sinks.without_sink(pat, [0]) if no_sink else pat        # each head's pieces, before words/mean
    if no_special:
        shown = sinks.without_tokens(shown, specials)
        q_pieces = k_pieces = [p for i, p in enumerate(k_pieces) if i not in specials]
    mat, qp, kp = patterns.head_matrix(shown, head, q_pieces, k_pieces, words)
    qp = piece_labels.row_labels(q_pieces, None, words) if no_special else piece_labels.query_labels(run, block, words)
else:
    qp, kp = piece_labels.query_labels(run, block), k_pieces
(qa, qb), (ka, kb) = widgets.window(len(qp), len(kp), "at_window", pieces=kp)     # a long text: a window of it
mat = mat[qa:qb, ka:kb] if whole else windows.head_window(run.cache, block, layer, head, (qa, qb), (ka, kb), no_sink)
title = t("at.heatmap_title", block=widgets.block_label(block), layer=layer, head=widgets.head_label(head))
if no_special:
    title = t("at.no_special_title", title=title)
if no_sink:
    title = t("at.no_sink_title", title=title)
    share = sinks.share_of(sinks.sink_shares(run.cache, block, n_layers, layers=[layer]), layer, head)
    st.caption(t("at.no_sink_note" if isinstance(head, int) else "at.no_sink_note_heads",
                 share=f"{share:.0%}" if share == share else "–", piece=widgets.md_escape(k_pieces[0])))
fig = heatmaps.attention_heatmap(mat, qp[qa:qb], kp[ka:kb], title, t("axis.key"), widgets.query_axis(block),
                                 colorbar=t("cb.weight"), q_start=qa, k_start=ka,
                                 zmax=widgets.window_zmax(mat, len(kp)))
in_window = lambda bs: [min(max(b - ka, 0), kb - ka) for b in bs]      # noqa: E731  (boundaries in the window)
seg = architectures.segments(run, cfg)
if seg is not None and not words:          # one sequence: mark [begin] | source | [sep] + target
    st.caption(t("at.segments", a=seg.source_end - 1, b=seg.source_end, c=seg.target_start))
    model_figures.mark_segments(fig, in_window([seg.source_start, seg.source_end]),
                               ["", t("ar.part.source"), t("ar.part.target")])
pair = run.segments if cfg.is_encoder_only else None
if pair and 1 in pair and not (words or no_special):      # a sentence pair: mark where sentence B starts
    model_figures.mark_segments(fig, in_window([pair.index(1)]), [t("at.sentence_a"), t("at.sentence_b")])
widgets.show(fig, key="at_heatmap")

# -- model view: click a tile to open that head -------------------------------------------------
st.subheader(t("at.model_view"))
st.caption(t("at.model_view_help"))
tile = TILE if n_layers * cfg.n_heads <= GRID_CELLS else TILE // 2
part = not whole and (qb - qa, kb - ka) != (len(qp), len(kp))         # a long text: every head over the window
if part:
    st.caption(t("at.model_view_window", qa=qa, qb=qb - 1, ka=ka, kb=kb - 1))
    layers = windows.layer_windows(run.cache, block, n_layers, (qa, qb), (ka, kb))
else:
    layers = (patterns.layer_patterns(run.cache, block, l) for l in range(n_layers))
n_shown = max(qb - qa, kb - ka) if part else max(len(q_pieces), len(k_pieces))
if n_shown > tile:
    st.caption(t("at.downsampled", n=n_shown, m=tile))
sel = (layer, head) if isinstance(head, int) else None
widgets.show(heatmaps.model_view(patterns.model_view_tiles(layers, tile), t("at.model_view_title",
             block=widgets.block_label(block)), t("axis.layer"), t("axis.head"), selected=sel,
             colorbar=t("at.model_view_cb"), hover=t("at.model_view_hover")),
             key="at_model_view", on_select=callbacks.open_head(cfg.n_heads), selection_mode="points")

# -- line view ------------------------------------------------------------------------------------
st.subheader(t("at.line_view"))
c = st.columns([2, 1, 2])
default = [head] if isinstance(head, int) else [0]
heads = c[0].multiselect(t("at.line_heads"), list(range(cfg.n_heads)), default=default, max_selections=4,
                         format_func=in_language(widgets.head_label), key=f"at_line_heads_{head}")
min_w = c[1].slider(t("at.line_min"), 0.0, 0.5, 0.05, 0.01, key="at_line_min")
lq, lk = (qp, kp)
n = max(len(lq), len(lk))
(qa, qb), (ka, kb) = (0, len(lq)), (0, len(lk))
if n > LINE_WINDOW:
    start = c[2].slider(t("at.line_window"), 0, n - LINE_WINDOW, 0, key="at_line_start")
    (qa, qb), (ka, kb) = patterns.axis_windows(len(lq), len(lk), start, LINE_WINDOW)
    st.caption(t("at.line_capped", qa=qa, qb=qb - 1, ka=ka, kb=kb - 1, m=MAX_LINES))
if heads:
    mats = [patterns.head_matrix(shown, h, q_pieces, k_pieces, words)[0][qa:qb, ka:kb] if whole else   # as the
            windows.head_window(run.cache, block, layer, h, (qa, qb), (ka, kb), no_sink) for h in heads]  # heatmap
    widgets.show(heatmaps.line_view(mats, lq[qa:qb], lk[ka:kb], [widgets.head_label(h) for h in heads],
                                 t("at.line_title", block=widgets.block_label(block), layer=layer), q_start=qa,
                                 k_start=ka, max_lines=MAX_LINES, min_weight=min_w, query_label=widgets.query_axis(block),
                                 key_label=t("axis.key"), colorbar=t("cb.weight")), key="at_lines")
