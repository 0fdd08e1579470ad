"""Three architectures, one sentence: the translation each produced, where its target reads the
source, the mask it applied, and how the mask shapes the rank of its attention patterns."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.server import defaults
from viz_explorer.server import threads
from viz_explorer.kit import callbacks
from viz_explorer.kit import confidence_note
from viz_explorer.kit import context
from viz_explorer.pages.experiment import norm_twins
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import architectures as A
from viz_transformer.core import recipes
from viz_transformer.plots import heatmaps
from viz_transformer.plots import model_figures

ctx = context.need_run()
st.title(t("ar.title"))
trio = cached.comparison()                  # one catalog read for the models, the recipe and what else differs
models = {arch: info.path for arch, info in trio.items()}
fair = recipes.same_recipe(trio.values())
facts = {arch: cached.model_facts(str(path), cached.folder_stamp(path)) for arch, path in models.items()}   # no weights
others = recipes.other_differences(trio.values()) if fair else {}   # one recipe, but norms or schedules differ: said
names = lambda found: {k: t("ar.and").join(map(widgets.md_escape, v)) for k, v in found.items()}  # noqa: E731
if others:
    fair_note = t("ar.fair_but", items=t("ar.diff.sep").join(t(f"ar.diff.{key}", **names(found)) for key, found in others.items()))
else:
    fair_note = t("ar.fair") if fair else ""
st.markdown(t("ar.intro") + (" " + fair_note if fair_note else ""))
if len(models) < 2:
    st.info(t("ar.need", have=", ".join(p.name for p in models.values()) or "–"))
    st.stop()
text = ctx.text if ctx.kind == "translator" and ctx.text.strip() else defaults.EXAMPLES["translator"][0]
if text != ctx.text:
    st.caption(widgets.md_escape(t("ar.using", text=text)))
if not fair:
    st.warning(t("ar.unfair"), icon=":material/balance:")

with st.spinner(t("sidebar.running")):      # cached.arch_view: the small part of each model's run this page shows
    views = threads.each(lambda path: cached.arch_view(str(path), cached.folder_stamp(path), text), models.values())
runs = dict(zip(models, views))
row, piece = next(iter(runs.values()))["example"]         # the first model's (the encoder-decoder's)
st.caption(t("rows.intro", row=widgets.md_escape(row), piece=widgets.md_escape(piece)))
depth = st.segmented_control(t("ar.depth"), ["first", "last"], default="last", required=True, key="ar_depth",
                             format_func=in_language(callbacks.label("ar.depth.")))
mask_kw = dict(xlabel=t("axis.key"), ylabel=t("axis.query"), allowed=t("mask.allowed"), blocked=t("mask.blocked"),
               colorbar=t("cb.mask"))
parts = ["", t("ar.part.source"), t("ar.part.target")]          # [begin] is one column: no room for its name
cfgs = {arch: facts[arch].cfg for arch in runs}
tabs = widgets.lazy_tabs("ar")        # only the open tab runs and is drawn
with tabs["reads"]:
    if tabs["reads"].open:
        st.subheader(t("ar.row.output"))
        for where, (arch, run) in zip(st.columns(len(runs)), runs.items()):
            with where:
                st.markdown(f"**{t('ov.arch.' + arch)}**")
                st.caption(t("ar.checkpoint", name=models[arch].name, n=facts[arch].n_params))
                widgets.output(run["output"] or t("ov.empty_output"), arch)
                conf = confidence_note.show(facts[arch], run["confidence"], note=False)
                if conf.flagged:
                    st.warning(confidence_note.architecture_verdict(facts[arch], conf) + "\n\n"
                               + confidence_note.warning_text(facts[arch], conf), icon=":material/report:")
        st.subheader(t("ar.row.reads"))
        st.caption(t("ar.row.reads_help"))
        reads = {arch: run["reads"][0 if depth == "first" else cfgs[arch].n_decoder_layers - 1] for arch, run in runs.items()}
        cols, width = widgets.figure_columns(len(runs), max(len(qp) for _, qp, _ in reads.values()),
                                             max(len(kp) for _, _, kp in reads.values()))
        for where, (arch, (w, qp, kp)) in zip(cols, reads.items()):
            cfg = cfgs[arch]
            with where:
                title = t(f"ar.reads.{'cross' if cfg.is_encoder_decoder else 'self'}", arch=t("ar.short." + arch),
                          layer=0 if depth == "first" else cfg.n_decoder_layers - 1)
                widgets.show(heatmaps.attention_heatmap(w, qp, kp, title, t("axis.source"), t("ar.target_axis"),
                                                     t("cb.weight"), width=width), key=f"ar_reads_{arch}")

with tabs["masks"]:
    if tabs["masks"].open:
        st.subheader(t("ar.row.masks"))
        n = max(len(q) for run in runs.values() for _, q in run["masks"].values())
        cols, width = widgets.figure_columns(len(runs), n, n)
        for where, (arch, run) in zip(cols, runs.items()):
            with where:
                for b, (mask, q) in run["masks"].items():
                    name = A.hook_name(b, 0, "hook_mask")
                    fig = heatmaps.mask_heatmap(mask, q, q, t("ar.mask", arch=t("ar.short." + arch), hook=name),
                                             width=width, **mask_kw)
                    seg = run["segments"]
                    if seg is not None:
                        model_figures.mark_segments(fig, [seg.source_start, seg.source_end], parts)
                    widgets.show(fig, key=f"ar_mask_{arch}_{b}")
        st.markdown(t("ar.differs"))

with tabs["rank"]:
    if tabs["rank"].open:
        st.subheader(t("ar.rank"))
        st.markdown(t("ar.rank_intro"))
        table = cached.rank_tables(runs)
        groups, sizes = {}, {}
        for (arch, block), g in table.groupby(["model", "block"], sort=False):
            label = f"{t('ar.short.' + arch)} · {t('block.' + block)}"
            groups[label], sizes[label] = g["effective_rank"].tolist(), int(g["m"].iloc[0])
        widgets.show(model_figures.rank_strip(groups, t("ar.rank_title", text=text), t("ar.rank_x"),
                                             t("ar.rank_y"), sizes), key="ar_rank")
        if (table["m"] < table["n"]).any():
            st.caption(t("ar.rank_window", m=int(table["m"].max())))
        spectra = {f"{t('ar.short.' + arch)} · {t('block.' + block)}": s for (arch, block), s in
                   cached.spectra(runs, depth).items()}
        widgets.show(model_figures.spectra(spectra, t("ar.spectra_title", depth=t(f"ar.depth.{depth}")),
                                          t("ar.sv_x"), t("ar.sv_y")), key="ar_spectra")
        summary = table.groupby(["model", "block"], sort=False).agg(
            heads=("head", "size"), n=("n", "first"), m=("m", "first"), effective_rank=("effective_rank", "mean"),
            smallest_sv_ratio=("min_sv_ratio", "min"), causal=("causal", "all")).reset_index()
        config = {c: st.column_config.Column(t(f"ar.col.{c}")) for c in ("model", "block", "heads", "n", "m", "causal")}
        config.update(effective_rank=st.column_config.NumberColumn(t("ar.col.effective_rank"), format="%.2f"),
                      smallest_sv_ratio=st.column_config.NumberColumn(t("ar.col.smallest_sv_ratio"), format="%.2e"))
        st.dataframe(summary.assign(model=[t(f"ar.short.{m}") for m in summary["model"]],
                                    block=[t(f"block.{b}") for b in summary["block"]]),
                     hide_index=True, column_config=config)
        st.markdown(t("ar.rank_why"))

with tabs["norm"]:
    if tabs["norm"].open:
        st.subheader(t("ar.norm"))
        pair = cached.norm_pair(models.get("encoder_decoder"))    # the comparison's own model first, else any twin
        alone = [] if pair else cached.post_norm_models()
        pre = pair[0] if pair else models.get("encoder_decoder")
        st.markdown(t("ar.norm_intro") + " " + (t("ar.norm_has_twin", pre=pair[0].name, post=pair[1].name) if pair
                                                 else t("ar.norm_lone_post", post=alone[0].name) if alone
                                                 else t("ar.norm_all_pre")))
        base = cached.model_facts(str(pre), cached.folder_stamp(pre)) if pre is not None else None
        grads = (base.meta or {}).get("init_grad_norms") if base is not None else None
        if grads:
            lines = {t("ar.norm_pre"): grads["pre"], t("ar.norm_post"): grads["post"]}
            title = t("ar.norm_fig", name=pre.name, n=grads["n_pairs"], seeds=len(grads["seeds"]))
            widgets.show(model_figures.layer_gradients(grads["layers"], lines, title, t("ar.norm_x"), t("ar.norm_y")),
                         key="ar_norm")
            st.markdown(t("ar.norm_reads", **A.gradient_growth(grads)))
        else:
            st.info(t("ar.norm_none", cmd="python -m viz_transformer init-grads CHECKPOINT"))
        if pair:
            st.subheader(t("ar.twin"))
            norm_twins.show(*pair)
        elif alone:
            norm_twins.show_sweep(alone[0])
        else:
            st.caption(t("ar.twin_none"))
