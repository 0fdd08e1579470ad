"""The shared sidebar: pick a checkpoint and a text, load the model, run the text (cached)."""
from __future__ import annotations

import streamlit as st

from viz_explorer.server.cached import load_model, run_text
from viz_explorer.server import defaults
from viz_explorer.server.defaults import EXAMPLES, checkpoint_roots
from viz_explorer.kit import page_parts
from viz_explorer.kit import language_pair
from viz_explorer.kit.context import Context
from viz_explorer.kit.strings import in_language, t
from viz_transformer import CheckpointError, list_roots


INPUTS = "sb_inputs"        # the key of the sidebar's box of inputs (its CSS class: st-key-sb_inputs)


def _examples_of(info) -> list[str]:
    return defaults.examples(info.config if info is not None else None)


def _on_checkpoint_change(infos: dict) -> None:
    """Keep the text unless it is one of another kind's examples (then offer this model's first)."""
    mine = _examples_of(infos.get(st.session_state.get("ckpt")))
    others = {e for lst in (*EXAMPLES.values(), defaults.MLM_EXAMPLES) for e in lst} - set(mine)
    if st.session_state.get("text") in others:
        st.session_state["text"] = mine[0]


def _on_example() -> None:
    if st.session_state.get("example"):
        st.session_state["text"] = st.session_state["example"]
    st.session_state["example"] = None


def checkpoint_names() -> list[str]:
    """The checkpoints the sidebar offers."""
    return [i.name for i in list_roots(checkpoint_roots())]


def sidebar() -> Context:
    """Render the shared sidebar and compute (cached) the run for the chosen checkpoint and text. The checkpoint,
    the examples, the text and the model's line go in one box (INPUTS), which the app's CSS shows above the page
    list (viz_explorer/kit/presenter.py, SIDEBAR_STYLE): where to type is in a laptop's or a phone's first screen."""
    sb = st.sidebar.container(key=INPUTS)
    infos = {i.name: i for i in list_roots(checkpoint_roots())}   # checks each weights header
    if not infos:
        sb.error(t("sidebar.no_checkpoints", root=", ".join(map(str, checkpoint_roots()))))
        return Context("", None, "", error=t("sidebar.no_checkpoints", root=", ".join(map(str, checkpoint_roots()))))
    names = list(infos)
    good = [n for n in names if infos[n].error is None]
    if st.session_state.get("ckpt") not in names:
        st.session_state["ckpt"] = defaults.CHECKPOINT if defaults.CHECKPOINT in good else (good or names)[0]
    name = sb.selectbox(t("sidebar.checkpoint"), names, key="ckpt", help=t("sidebar.checkpoint_help",
                        root=", ".join(map(str, checkpoint_roots()))), on_change=_on_checkpoint_change, args=(infos,),
                        format_func=in_language(lambda n: n if infos[n].error is None else t("sidebar.broken_mark", name=n)))
    broken = [n for n in names if infos[n].error]
    if broken:
        with sb.expander(t("sidebar.broken_title"), expanded=infos[name].error is not None):
            for n in broken:
                st.text(f"{n}: {infos[n].error}")
    info = infos[name]
    shown = _examples_of(info)
    st.session_state.setdefault("text", shown[0])
    sb.pills(t("sidebar.examples"), shown, key="example", on_change=_on_example)
    text = sb.text_area(t("sidebar.text"), key="text", help=t("sidebar.text_help"), height=100)
    ctx = Context(name, info.path, text)
    if info.error:
        ctx.error = info.error
        return ctx
    try:
        with st.spinner(t("sidebar.loading")):
            ctx.hm = load_model(str(info.path), ctx.stamp)
            ctx.path, ctx.hm = language_pair.choose(ctx.hm, info.path, ctx.stamp, text)   # a translator's languages
    except (CheckpointError, OSError, RuntimeError, ValueError) as e:
        ctx.error = str(e)
        return ctx
    cfg = ctx.hm.cfg
    sb.caption(t("sidebar.model_caption", arch=t("ar.short." + cfg.architecture), layers=page_parts.layers_label(cfg),
                 heads=cfg.n_heads,
                 d_model=cfg.d_model))
    if ctx.hm.languages is not None:
        sb.caption(language_pair.label(ctx.hm))
    if text.strip():
        try:
            with st.spinner(t("sidebar.running")):
                ctx.run = run_text(str(ctx.path), ctx.stamp, text)
        except (CheckpointError, RuntimeError, ValueError, OSError) as e:   # e.g. files rewritten mid-load
            ctx.error, ctx.error_title = str(e), "msg.failed"
            return ctx
    return ctx
