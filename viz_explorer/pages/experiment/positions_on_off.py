"""Page: the same text with and without positional encoding: output and one head's attention side by
side, and the order test (the text's pieces permuted: a bag of vectors without positions)."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.server import threads
from viz_explorer.kit import callbacks
from viz_explorer.kit import confidence_note
from viz_explorer.kit import context
from viz_explorer.kit import on_request
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.run import permute
from viz_transformer.plots import heatmaps

ctx = context.need_run()
cfg, run = ctx.hm.cfg, ctx.run
path = str(ctx.path)
st.title(t("po.title"))
widgets.needs_decoder(ctx.hm.cfg, "nav.positions")
widgets.intro("po")
widgets.rows_note(run)
if not cfg.is_encoder_decoder:
    st.caption(t("po.intro_lm"))

if not on_request.asked(ctx.hm, "positions", (ctx.name, ctx.text), t("po.run")):
    st.stop()


def order_test(state: str, how: str):
    return cached.order_test(path, ctx.stamp, ctx.text, how, state == "on")


def order_test_soon(how: str) -> None:
    """The order test with positions, made now so it runs beside the run without them (the test without positions
    reads that run); a failure shows where the test does."""
    try:
        order_test("on", how)
    except ValueError:
        pass


with st.spinner(t("sidebar.running")):
    off = threads.each(lambda job: job(), (lambda: cached.positions_off(path, ctx.stamp, ctx.text),
                                           lambda: order_test_soon(st.session_state.get("po_how") or "reverse")))[0]
block, layer, head = widgets.block_layer_head(st.columns(3), cfg, "po")
shown = {}
for where, state, r in zip(st.columns(2), ("on", "off"), (run, off)):
    with where:
        st.markdown(f"**{t('po.' + state)}**")
        widgets.output(r.output or t("ko.empty_output"), state)
        confidence_note.of_run(ctx.hm, r)
        shown[state] = (piece_labels.query_labels(r, block), piece_labels.block_pieces(r, block)[1],
                        patterns.head_pattern(r.cache, block, layer, head))
(qa, qb), (ka, kb) = widgets.window(max(len(q) for q, _, _ in shown.values()), max(len(k) for _, k, _ in shown.values()),
                                    "po_window", pieces=max((k for _, k, _ in shown.values()), key=len))
cols, width = widgets.figure_columns(2, qb - qa, kb - ka)
for where, (state, (q_pieces, k_pieces, mat)) in zip(cols, shown.items()):
    with where:
        widgets.show(heatmaps.attention_heatmap(mat[qa:qb, ka:kb], q_pieces[qa:qb], k_pieces[ka:kb],
                                             t("po.att_title", state=t(f"po.state_{state}"),
                                               block=widgets.block_label(block), layer=layer,
                                               head=widgets.head_label(head)),
                                             t("axis.key"), widgets.query_axis(block), colorbar=t("cb.weight"), q_start=qa,
                                             k_start=ka, width=width), key=f"po_att_{state}")

# -- the order test -------------------------------------------------------------------------------
st.subheader(t("po.order"))
st.caption(t("po.order_help"))
how = st.segmented_control(t("po.how"), list(permute.PERMUTATIONS), default="reverse", required=True, key="po_how",
                           format_func=in_language(callbacks.label("po.how.")))
try:
    with st.spinner(t("sidebar.running")):
        tests = dict(zip(("on", "off"), threads.each(lambda state: order_test(state, how), ("on", "off"))))
except ValueError as e:
    st.info(t("po.too_short", error=e))
    st.stop()
on = tests["on"]
widgets.output(f"{t('po.pieces')}: {' '.join(on.pieces)}\n{t('po.permuted')}: {' '.join(on.permuted_pieces)}", "order")
st.markdown(t("po.gap", part=t(f"dg.{on.part}")))
widgets.table({t("po.col.state"): [t(f"po.gap_{s}") for s in tests], t("po.col.gap"): [f"{r.gap:.2e}" for r in tests.values()],
               t("po.col.output"): [r.output for r in tests.values()],
               t("po.col.permuted_output"): [r.permuted_output for r in tests.values()]})
st.caption(t("po.gap_caption"))
