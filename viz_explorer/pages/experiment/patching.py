"""Page: activation patching, text B run with one component taken from text A. On an encoder-only model (it
generates nothing): the log p of A's top piece at A's first [MASK]."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import callbacks
from viz_explorer.kit import confidence_note
from viz_explorer.kit import context
from viz_explorer.kit import on_request
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import patterns
from viz_transformer.run import blank_effect, patching
from viz_transformer.plots import heatmaps
from viz_transformer.plots import lens_figures
from viz_transformer.core.hook_names import parse_prefix

# a second text for the examples (same number of pieces); otherwise the kind's default
PAIRS = {"我喜欢你。": "你喜欢我。", "我爱你。": "你爱我。", "我是一名工程师。": "我是一名科学家。", "我是学生。": "我是老师。",
         "Once upon a time there was a little dog.": "Once upon a time there was a little cat."}
DEFAULT = {"translator": "我是一名科学家。", "lm": "Once upon a time there was a little cat."}   # encoder: text A



def stream_label(i: int) -> str:
    """Residual stream i as the figure's rows and the table both name it: embeddings, or after layer i - 1."""
    layer = patching.resid_layer(i)
    return t("pt.row.embed") if layer is None else t("pt.row.layer", i=layer)


ctx = context.need_run()
cfg = ctx.hm.cfg
path = str(ctx.path)
st.title(t("pt.title"))
blank = cfg.is_encoder_only
if blank and blank_effect.blank_target(ctx.hm, ctx.run) is None:
    mask = getattr(ctx.hm.tokenizer, "mask_token", None) or "[MASK]"
    st.info(t("pt.blank_none", mask=mask) if cfg.head == "mlm" else t("pt.blank_no_head"), icon=":material/info:")
    st.stop()
st.caption(t("pt.intro"))
if blank:
    st.caption(t("pt.blank_what"))

c = st.columns(2)
c[0].text_input(t("pt.first"), ctx.text, disabled=True)
kind = "encoder" if blank else ctx.kind
key = f"pt_text_{kind}"
if st.session_state.get("pt_for") != (kind, ctx.text) and ctx.text in PAIRS:   # a new example: its pair
    st.session_state[key] = PAIRS[ctx.text]
st.session_state["pt_for"] = (kind, ctx.text)
st.session_state.setdefault(key, DEFAULT.get(kind, ctx.text))
other = c[1].text_input(t("pt.other"), key=key)
over = st.segmented_control(t("pt.over"), list(patching.OVER), default="heads", required=True, key="pt_over",
                            format_func=in_language(callbacks.label("pt.over.")), help=t("pt.over_help"))
if not other.strip():
    st.info(t("pt.empty"))
    st.stop()
if not on_request.asked(ctx.hm, "patching", (ctx.name, ctx.text, other, over), t("pt.run")):
    st.stop()
bar = st.progress(0.0, text=t("pt.running"))
try:
    df = cached.patching_scores(path, ctx.stamp, ctx.text, other, over, progress=lambda done, n: bar.progress(
        done / n, text=t("pt.progress", done=done, total=n)))
except patching.Misaligned as e:          # said once, in the interface's language; the pieces as the model cut them
    bar.empty()
    st.warning(t("pt.align", a=len(e.pieces_a), b=len(e.pieces_b)))
    st.code(f"A: {' '.join(e.pieces_a)}\nB: {' '.join(e.pieces_b)}", language=None, wrap_lines=True)
    st.caption(t("pt.align_tip"))
    st.stop()
except ValueError as e:
    bar.empty()
    st.warning(t("msg.failed"))
    st.code(str(e), language=None, wrap_lines=True)
    st.stop()

bar.empty()
a = df.attrs
c = st.columns(2)
for where, title, text, r in ((c[0], "pt.output_a", a["output_a"], ctx.run),
                               (c[1], "pt.output_b", a["output_b"], cached.run_text(path, ctx.stamp, other, runs=2))):
    where.markdown(f"**{t(title + ('_blank' if blank else ''))}**")
    widgets.output(text or t("ko.empty_output"), title, where)
    if not blank:
        confidence_note.of_run(ctx.hm, r, where)
st.caption(t("pt.blank_logprob" if blank else "pt.logprob", a=a["logprob_a"], b=a["logprob_b"]))
if df["score"].isna().all():
    st.warning(t("pt.same"))
    st.stop()

if over == "heads":
    limit = float(df["score"].abs().max())                     # one colour scale for every block
    for block in patterns.available_blocks(cfg):
        grid = patching.score_grid(df, "heads", block)
        widgets.show(heatmaps.head_grid(grid, t("pt.heads_title", block=widgets.block_label(block)), t("axis.layer"),
                                     t("axis.head"), t("pt.cb"), hover=t("pt.hover"), limit=limit),
                     key=f"pt_grid_{block}")
elif over == "blocks":
    kinds = list(dict.fromkeys(parse_prefix(p)[0] for p in df["block"]))
    widgets.show(lens_figures.score_heatmap(patching.score_grid(df, "blocks"),
                                          [t("pt.row.layer", i=i) for i in range(int(df["layer"].max()) + 1)],
                                          [widgets.block_label(k) for k in kinds], t("pt.blocks_title"),
                                          t("pt.axis.block"), t("axis.layer"), t("pt.cb")), key="pt_blocks")
else:
    grid = patching.score_grid(df, "resid")
    rows = [stream_label(i) for i in range(grid.shape[0])]
    pieces = list(dict.fromkeys(zip(df["pos"], df["piece"])))
    widgets.show(lens_figures.score_heatmap(grid, rows, [f"{q}:{p}" for q, p in pieces],
                                          t("pt.resid_title", part=a["part"]), t("pt.axis.pos"), t("axis.layer"),
                                          t("pt.cb")), key="pt_resid")

st.subheader(t("pt.top"))
cols = {"score": t("pt.col.score"), "logprob": t("pt.col.logprob_blank" if blank else "pt.col.logprob")}
cols.update({c: t(f"ko.col.{c}") for c in ("block", "layer", "head")},        # a resid row keeps its capture name
            name=t("pt.col.hook"), pos=t("pt.col.pos"), piece=t("pt.col.piece"))
top = df.sort_values("score", ascending=False).head(10)
if over == "resid":
    top = top.assign(layer=[stream_label(int(i)) for i in top["layer"]])
top = top.assign(block=[widgets.prefix_label(p) for p in top["block"]]) if "block" in top else top
st.dataframe(top.rename(columns=cols), hide_index=True, key="pt_table")
