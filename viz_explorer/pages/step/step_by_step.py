"""Page: one head's attention recomputed stage by stage from the captured Q, K, V."""
import math

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import context
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.analysis import attention_maths, patterns, piece_labels
from viz_transformer.core.positional import position_terms
from viz_transformer.plots import charts, heatmaps

ctx = context.need_run()
run, cfg = ctx.run, ctx.hm.cfg
st.title(t("st.title"))
widgets.intro("st")
widgets.rows_note(run)

c = st.columns([3, 1, 1])
block, layer, head = widgets.block_layer_head(c, cfg, "st", default_block="decoder.self_attn")
sqrt_dk = math.sqrt(cfg.d_head)
model_div, bias = position_terms(run.cache, patterns.hook_name(block, layer, "hook_pattern").rsplit(".", 1)[0], head)
if model_div is not None:                   # T5: scores not divided (÷ 1), its relative position bias added
    sqrt_dk = model_div
    st.caption(t("st.relative"))
model_says = "_unscaled" if model_div is not None else ""        # T5: the model divides by 1, not by √d_k
divisor = st.slider(t("st.divisor" + model_says, sqrt=sqrt_dk), 0.1, round(max(8.0, 4 * sqrt_dk), 1), round(sqrt_dk, 2), 0.05,
                    key=f"st_div_{cfg.d_head}" + ("_t5" if model_div is not None else ""), help=t("st.divisor_help"))
divisor = sqrt_dk if model_div is not None and abs(divisor - sqrt_dk) < 0.03 else \
    attention_maths.snap_divisor(divisor, cfg.d_head)                      # the slider's default is √d_k rounded

q, k, v, mask = patterns.head_qkv(run.cache, block, layer, head)
hs = attention_maths.attention_steps(q, k, v, mask, divisor, bias)
q_pieces, k_pieces = piece_labels.query_labels(run, block), piece_labels.block_pieces(run, block)[1]
T, S = len(q_pieces), len(k_pieces)
(qa, qb), (ka, kb) = widgets.window(T, S, "st_start", pieces=k_pieces)
ql, kl = heatmaps.labels(q_pieces[qa:qb], qa), heatmaps.labels(k_pieces[ka:kb], ka)
dims = heatmaps.dims(cfg.d_head)
xd, yq, yk, xk = t("axis.d_head"), widgets.query_axis(block), t("axis.key"), t("axis.key")

tabs = widgets.lazy_tabs("st")        # only the open tab runs and is drawn

with tabs["qkv"]:
    if tabs["qkv"].open:
        cols, width = widgets.figure_columns(3, max(qb - qa, kb - ka), len(dims), labels=ql + kl,
                                             colorbars=(t("cb.value"),))
        for where, m, rows, key, ylab in [(cols[0], hs.q[qa:qb], ql, "st.Q", yq),
                                          (cols[1], hs.k[ka:kb], kl, "st.K", yk), (cols[2], hs.v[ka:kb], kl, "st.V", yk)]:
            with where:
                widgets.show(heatmaps.values_heatmap(m, rows, dims, t(key, head=head), xd, ylab, t("cb.value"),
                                                  width=width))

with tabs["scores"]:
    if tabs["scores"].open:
        cols, width = widgets.figure_columns(2, qb - qa, kb - ka, labels=ql, colorbars=(t("cb.score"),))
        with cols[0]:
            widgets.show(heatmaps.values_heatmap(hs.qk[qa:qb, ka:kb], ql, kl, t("st.QK"), xk, yq, t("cb.score"),
                                              width=width))
        with cols[1]:
            widgets.show(heatmaps.values_heatmap(hs.scaled[qa:qb, ka:kb], ql, kl, t("st.scaled", div=divisor), xk, yq,
                                              t("cb.score"), width=width))
        cols, width = widgets.figure_columns(2, qb - qa, kb - ka, labels=ql,
                                             colorbars=(t("cb.score"), t("cb.weight")))
        with cols[0]:
            widgets.show(heatmaps.values_heatmap(hs.masked[qa:qb, ka:kb], ql, kl, t("st.masked"), xk, yq, t("cb.score"),
                                              width=width))
        with cols[1]:
            widgets.show(heatmaps.attention_heatmap(hs.weights[qa:qb, ka:kb], q_pieces[qa:qb], k_pieces[ka:kb],
                                                 t("st.softmax"), xk, yq, t("cb.weight"), qa, ka, width=width),
                         key="st_weights")
        check = attention_maths.sdpa_difference(hs, q, k, v, mask, None if divisor == math.sqrt(cfg.d_head) else divisor,
                                                bias)   # None: SDPA's √d_k
        st.metric(t("st.check", div=divisor), f"{check[0]:.2e}")
        if divisor != sqrt_dk:
            st.info(t("st.check_other"))

with tabs["output"]:
    if tabs["output"].open:
        widgets.show(heatmaps.values_heatmap(hs.z[qa:qb], ql, dims, t("st.z"), xd, yq, t("cb.value")))

        # -- sharpen / flatten: one query row at the chosen divisor vs the model's √d_k ---------------------
        model = patterns.head_pattern(run.cache, block, layer, head)        # at the model's √d_k
        row = st.slider(t("st.row"), 0, T - 1, min(1, T - 1), key="st_row") if T > 1 else 0
        series = {t("st.series_div", div=divisor): hs.weights[row], t("st.series_model" + model_says, sqrt=sqrt_dk): model[row]}
        widgets.show(charts.grouped_bars(heatmaps.labels(k_pieces), series, t("st.row_title", q=f"{row}:{q_pieces[row]}",
                                        div=divisor), yk, t("cb.weight")))
        st.metric(t("st.entropy", max=attention_maths.uniform_entropy(mask[row])), f"{attention_maths.entropy(hs.weights[row]):.3f}")

with tabs["why"]:
    if tabs["why"].open:
        st.subheader(t("st.why"))
        st.markdown(t("st.why_text"))
        var = cached.qk_variance()
        widgets.show(charts.curves(var["d_k"], {t("st.var_raw"): var["raw"], t("st.var_scaled"): var["scaled"]},
                                  t("st.var_title"), t("axis.d_k"), t("st.var_y"), log_x=True, log_y=True))
