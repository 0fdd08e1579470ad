"""What every page shares: the sidebar (checkpoint, text), the cached model and run, small widgets.

app.py calls sidebar() once per rerun and stores the Context; pages call need_run() to get it.
Models are cached per (folder, files' mtime), so a checkpoint rewritten by training is reloaded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import streamlit as st

from views.strings import t
from viz_transformer import CheckpointError, decode, list_checkpoints, load_checkpoint
from viz_transformer import analysis, capture

ROOT = Path(__file__).resolve().parent.parent
CTX = "_viz_ctx"
EXAMPLES = {"translator": ["我是一名工程师。", "我爱你。", "今天天气很好。", "我的猫喜欢睡觉。",
                           "你叫什么名字？"],
            "lm": ["Once upon a time there was a little dog.", "The cat sat on the mat and looked at the bird.",
                   "Lily wanted to play in the park, but it was raining."]}
SECOND = {"translator": ["好。", "我们明天早上八点在学校门口见面，然后一起坐火车去北京。"],   # padding demo:
          "lm": ["Hi.", "The little dog ran to the park and played with his friends all day."]}  # one is picked
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


@dataclass
class Context:
    name: str
    path: Optional[Path]
    text: str
    hm: object = None          # HookedModel
    run: object = None         # Run
    error: Optional[str] = None
    error_title: str = "msg.broken"

    @property
    def stamp(self) -> float:
        return folder_stamp(self.path)

    @property
    def kind(self) -> str:
        return "translator" if self.hm is not None and self.hm.cfg.is_encoder_decoder else "lm"


def checkpoints_root() -> Path:
    return Path(os.environ.get("VIZ_CHECKPOINTS") or ROOT / "checkpoints")


def folder_stamp(path) -> float:
    """Newest mtime of a checkpoint folder's files: part of every cache key."""
    if path is None:
        return 0.0
    return max((f.stat().st_mtime for f in Path(path).glob("*") if f.is_file()), default=0.0)


@st.cache_resource(show_spinner=False, max_entries=3)
def load_model(path: str, stamp: float):
    return load_checkpoint(path)


@st.cache_resource(show_spinner=False, max_entries=6)
def capture(path: str, stamp: float, text: str):
    return load_model(path, stamp).run(text)


@st.cache_resource(show_spinner=False, max_entries=12)
def trace(path: str, stamp: float, text: str, **params):
    return decode(load_model(path, stamp), text, **params)


@st.cache_resource(show_spinner=False, max_entries=4)
def padded(path: str, stamp: float, text: str, other: str):
    return capture.padded_batch(load_model(path, stamp), text, other)


@st.cache_data(show_spinner=False)
def qk_variance() -> dict:
    return analysis.qk_variance()


def _kind_of(info) -> str:
    return "translator" if info is not None and info.config is not None and info.config.is_encoder_decoder else "lm"


def _on_checkpoint_change(infos: dict) -> None:
    """Keep the text unless it is one of the other kind's examples (then offer this kind's)."""
    kind = _kind_of(infos.get(st.session_state.get("ckpt")))
    other = EXAMPLES["lm" if kind == "translator" else "translator"]
    if st.session_state.get("text") in other:
        st.session_state["text"] = EXAMPLES[kind][0]


def _on_example() -> None:
    if st.session_state.get("example"):
        st.session_state["text"] = st.session_state["example"]
    st.session_state["example"] = None


def sidebar() -> Context:
    """Render the shared sidebar and compute (cached) the run for the chosen checkpoint and text."""
    sb = st.sidebar
    infos = {i.name: i for i in list_checkpoints(checkpoints_root())}   # checks each weights header
    if not infos:
        sb.error(t("sidebar.no_checkpoints", root=checkpoints_root()))
        return Context("", None, "", error=t("sidebar.no_checkpoints", root=checkpoints_root()))
    names = list(infos)
    good = [n for n in names if infos[n].error is None]
    if st.session_state.get("ckpt") not in names:
        st.session_state["ckpt"] = "zh-en" if "zh-en" in good else (good or names)[0]
    name = sb.selectbox(t("sidebar.checkpoint"), names, key="ckpt", help=t("sidebar.checkpoint_help",
                        root=checkpoints_root()), on_change=_on_checkpoint_change, args=(infos,),
                        format_func=lambda n: n if infos[n].error is None else t("sidebar.broken_mark", name=n))
    broken = [n for n in names if infos[n].error]
    if broken:
        with sb.expander(t("sidebar.broken_title"), expanded=infos[name].error is not None):
            for n in broken:
                st.text(f"{n}: {infos[n].error}")
    info = infos[name]
    kind = _kind_of(info)
    st.session_state.setdefault("text", EXAMPLES[kind][0])
    sb.pills(t("sidebar.examples"), EXAMPLES[kind], key="example", on_change=_on_example)
    text = sb.text_area(t("sidebar.text"), key="text", help=t("sidebar.text_help"), height=100)
    ctx = Context(name, info.path, text)
    if info.error:
        ctx.error = info.error
        return ctx
    try:
        with st.spinner(t("sidebar.loading")):
            ctx.hm = load_model(str(info.path), ctx.stamp)
    except (CheckpointError, OSError, RuntimeError, ValueError) as e:
        ctx.error = str(e)
        return ctx
    cfg = ctx.hm.cfg
    layers = (t("sidebar.layers_ed", enc=cfg.n_encoder_layers, dec=cfg.n_decoder_layers) if cfg.is_encoder_decoder
              else t("sidebar.layers_d", dec=cfg.n_decoder_layers))
    sb.caption(t("sidebar.model_caption", arch=cfg.architecture, layers=layers, heads=cfg.n_heads,
                 d_model=cfg.d_model))
    if text.strip():
        try:
            with st.spinner(t("sidebar.running")):
                ctx.run = capture(str(info.path), ctx.stamp, text)
        except (CheckpointError, RuntimeError, ValueError, OSError) as e:   # e.g. files rewritten mid-load
            ctx.error, ctx.error_title = str(e), "msg.failed"
            return ctx
        if ctx.run.n_cut:
            sb.warning(t("sidebar.cut", n=ctx.run.n_cut, max_len=cfg.max_len))
    return ctx


def need_run(require_text: bool = True) -> Context:
    """The shared context for a page; stops the page with a message when there is nothing to show."""
    ctx: Optional[Context] = st.session_state.get(CTX)
    if ctx is None or ctx.error:
        st.error(t(ctx.error_title if ctx is not None else "msg.broken"))
        if ctx is not None and ctx.error:
            st.code(ctx.error, language=None, wrap_lines=True)
        st.stop()
    if require_text and ctx.run is None:
        st.info(t("msg.empty"))
        st.stop()
    if ctx.run is not None and ctx.run.n_cut:
        st.warning(t("sidebar.cut", n=ctx.run.n_cut, max_len=ctx.hm.cfg.max_len))
    return ctx


def show(fig, key: Optional[str] = None, **kw):
    """Every figure goes through here: Plotly's own colours (theme=None) and its toolbar with PNG export."""
    return st.plotly_chart(fig, theme=None, width="stretch", config=PLOTLY_CONFIG, key=key, **kw)


def select(where, label: str, options: list, key: str, default=None, **kw):
    """A selectbox whose remembered value is reset when the options change (e.g. another checkpoint)."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else options[0]
    return where.selectbox(label, options, key=key, **kw)


def block_label(block: str) -> str:
    return t(f"block.{block}")


def head_label(h) -> str:
    return t(f"head.{h}") if isinstance(h, str) else t("at.head_n", h=h)


def block_layer_head(where_cols, cfg, prefix: str, with_reduce: bool = False, default_block: Optional[str] = None):
    """The (block, layer, head) pickers used by several pages. Keys are prefixed per page."""
    blocks = analysis.available_blocks(cfg)
    block = select(where_cols[0], t("block"), blocks, f"{prefix}_block", default_block, format_func=block_label)
    layer = select(where_cols[1], t("layer"), list(range(analysis.n_layers(cfg, block))), f"{prefix}_layer")
    heads = list(range(cfg.n_heads)) + (["mean", "max"] if with_reduce else [])
    head = select(where_cols[2], t("head"), heads, f"{prefix}_head", format_func=head_label)
    return block, layer, head


# -- decoding page state (plain session keys, not widgets, so they survive page switches) ----------
def reset_steps_if_changed(key) -> None:
    """A new trace (other text, strategy or parameters) starts again from [begin]."""
    if st.session_state.get("dc_key") != key:
        st.session_state["dc_key"] = key
        st.session_state["dc_step"] = 0
        st.session_state["dc_playing"] = False


def set_step(i: int) -> None:
    st.session_state["dc_step"] = max(0, i)
    st.session_state["dc_playing"] = False


def toggle_play() -> None:
    st.session_state["dc_playing"] = not st.session_state.get("dc_playing", False)


_MD_SPECIAL = "\\`*_{}[]()#+-.!|<>~$"


def md_escape(s: str) -> str:
    """Text for st.markdown shown literally: markdown characters and < > are backslash-escaped."""
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in str(s))
