"""Page: the sinusoidal table, chosen dimensions as curves, position similarity, learned positions; RoPE; T5's bias."""
import streamlit as st

from viz_explorer.kit import context
from viz_explorer.pages.look import relative_bias, rope
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.analysis import positions
from viz_transformer.run import capture
from viz_transformer.plots import figure_rules
from viz_transformer.plots import heatmaps
from viz_transformer.plots import charts

ctx = context.need_run(require_text=False)
cfg = ctx.hm.cfg
st.title(t("pe.title"))
if cfg.positional == "rope":                 # nothing is added: the rotation of q and k, on this model's own q and k
    st.markdown(t("pe.uses", kind=t(f"pe.kind.{cfg.positional}"), d=cfg.d_model, L=cfg.max_len))
    rope.section(ctx)
    st.stop()
if cfg.positional == "relative":             # T5: nothing is added either: a learned bias on the scores, by offset
    st.markdown(t("pe.uses", kind=t(f"pe.kind.{cfg.positional}"), d=cfg.d_model, L=cfg.max_len))
    relative_bias.section(ctx)
    st.stop()
widgets.intro("pe")
st.markdown(t("pe.uses", kind=t(f"pe.kind.{cfg.positional}"), d=cfg.d_model, L=cfg.max_len))

n = st.slider(t("pe.n"), min(8, cfg.max_len - 1), cfg.max_len, min(100, cfg.max_len), key=f"pe_n_{cfg.max_len}")
tables = capture.positional_tables(ctx.hm, n)
kinds = [k for k in ("sinusoidal", "learned") if tables[k] is not None]
width = figure_rules.column_px(len(kinds))          # the two tables side by side, each laid out for its column
pos, dim = t("axis.position"), t("axis.dim")

for where, kind in zip(st.columns(len(kinds)), kinds):
    with where:
        title = t("pe.sin_title", n=n, d=cfg.d_model) if kind == "sinusoidal" else t("pe.learned_title")
        widgets.show(heatmaps.positional_heatmap(tables[kind], title, dim, pos, t("cb.value"), width=width),
                     key=f"pe_table_{kind}")

if tables["segments"] is not None:          # BERT: a second table added beside the positions, one row a sentence
    st.markdown(t("pe.segments", n=cfg.type_vocab_size))
    names = [t("at.sentence_a"), t("at.sentence_b")][:len(tables["segments"])]
    names += [str(i) for i in range(len(names), len(tables["segments"]))]
    widgets.show(heatmaps.values_heatmap(tables["segments"], names, [str(i) for i in range(cfg.d_model)],
                                         t("pe.segments_title"), dim, t("pe.segment"), t("cb.value")),
                 key="pe_segments")

d = cfg.d_model
defaults = sorted({i for i in (0, 1, 16, 64, d // 2) if i < d})   # a sin/cos pair, then ever slower waves
dims = st.multiselect(t("pe.dims"), list(range(d)), default=defaults, key=f"pe_dims_{d}")
if dims:
    src = tables["learned"] if cfg.positional == "learned" else tables["sinusoidal"]
    series = {t("pe.dim_n", d=i): src[:, i] for i in dims}
    widgets.show(charts.curves(range(n), series, t("pe.curves_title") + f" ({t('pe.kind.' + cfg.positional)})",
                              pos, t("cb.value")), key="pe_curves")

anchors = sorted({0, n // 4, n // 2})
for where, kind in zip(st.columns(len(kinds)), kinds):
    with where:
        name = t(f"pe.kind.{kind}")
        widgets.show(heatmaps.similarity_heatmap(positions.pe_similarity(tables[kind]), t("pe.sim_title", kind=name),
                                              pos, pos, t("cb.dot"), width=width), key=f"pe_sim_{kind}")
        m = n - 1 - max(anchors)
        offs = positions.similarity_by_offset(tables[kind], anchors, m)
        widgets.show(charts.curves(range(m + 1), {t("pe.anchor", p=p): v for p, v in offs.items()},
                                  t("pe.offset_title", kind=name), t("pe.offset"), t("cb.dot"), width=width),
                     key=f"pe_off_{kind}")
st.caption(t("pe.offset_note"))
