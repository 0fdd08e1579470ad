"""Page: two inputs through the same block, layer and head side by side, and their difference when the
two patterns have the same shape."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import confidence_note
from viz_explorer.kit import context
from viz_explorer.kit import on_request
from viz_explorer.kit import sentence_view
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.plots import heatmaps

# a second text cut into as many pieces as the examples' first, so the difference view has something to show
OTHER = {"translator": "我是一名科学家。", "lm": "Once upon a time there was a little cat."}

ctx = context.need_run()
cfg, run = ctx.hm.cfg, ctx.run
st.title(t("cp.title"))
widgets.intro("cp")
widgets.rows_note(run)

key = f"cp_text_{ctx.kind}"
st.session_state.setdefault(key, OTHER[ctx.kind])
other = st.text_input(t("cp.other"), key=key)
if not other.strip():
    st.info(t("cp.empty"))
    st.stop()
if not on_request.asked(ctx.hm, "compare", (ctx.name, other), t("cp.run")):
    st.stop()
try:
    with st.spinner(t("sidebar.running")):
        run2 = cached.run_text(str(ctx.path), ctx.stamp, other, runs=2)
except ValueError as e:
    st.error(str(e))
    st.stop()

if cfg.is_encoder_only:                 # a sentence encoder's question: how alike are the two texts' embeddings
    sentence_view.show(ctx.path, ctx.stamp, run, run2)
block, layer, head = widgets.block_layer_head(st.columns(3), cfg, "cp", with_reduce=True)
names = dict(block=widgets.block_label(block), layer=layer, head=widgets.head_label(head))
mats = []
for where, r, side in zip(st.columns(2), (run, run2), "ab"):
    with where:
        widgets.output(r.output or t("ko.empty_output"), side)
        confidence_note.of_run(ctx.hm, r)
        q_pieces, k_pieces = piece_labels.query_labels(r, block), piece_labels.block_pieces(r, block)[1]
        mats.append(patterns.head_matrix(patterns.layer_patterns(r.cache, block, layer), head, q_pieces, k_pieces))
(wq, wq_end), (wk, wk_end) = widgets.window(max(len(m[1]) for m in mats), max(len(m[2]) for m in mats), "cp_window",
                                              pieces=max((m[2] for m in mats), key=len))
cols, width = widgets.figure_columns(2, wq_end - wq, wk_end - wk)
for where, (mat, qp, kp), title in zip(cols, mats, ("cp.first_title", "cp.second_title")):
    with where:
        widgets.show(heatmaps.attention_heatmap(mat[wq:wq_end, wk:wk_end], qp[wq:wq_end], kp[wk:wk_end], t(title, **names),
                                             t("axis.key"), widgets.query_axis(block), colorbar=t("cb.weight"), q_start=wq,
                                             k_start=wk, width=width), key=f"cp_{title}")
(a, qa, ka), (b, qb, kb) = mats
if tuple(a.shape) != tuple(b.shape):
    st.info(t("cp.no_diff", a="×".join(map(str, a.shape)), b="×".join(map(str, b.shape))))
else:
    rows = [f"{x} / {y}" for x, y in zip(qa, qb)]
    cols = [f"{x} / {y}" for x, y in zip(ka, kb)]
    widgets.show(heatmaps.values_heatmap((a - b)[wq:wq_end, wk:wk_end], heatmaps.labels(rows[wq:wq_end], wq),
                                      heatmaps.labels(cols[wk:wk_end], wk), t("cp.diff_title", **names),
                                      t("cp.diff_axis"), t("cp.diff_axis"), colorbar=t("cb.diff")), key="cp_diff")
