"""What every page opens with: figures with one config (Plotly's toolbar with PNG, an HTML download), a page's
intro and formula, markdown that shows user text literally. Light: streamlit, plotly and the strings, no torch.
"""
from __future__ import annotations

import functools
import hashlib
import re
from typing import Optional

import streamlit as st

from viz_explorer.kit import presenter, static_table
from viz_explorer.kit.strings import LATEX, t

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
CALLBACKS = "_viz_callbacks"     # session_state: figure key -> its latest on_select callback


def _on_select(key: str) -> None:
    fn = st.session_state.get(CALLBACKS, {}).get(key)
    if fn is not None:
        fn()


def show(fig, key: Optional[str] = None, html: bool = True, on_select=None, **kw):
    """Every figure goes through here: Plotly's own colours (theme=None), its toolbar with PNG export, and
    a button under it that downloads the figure as standalone HTML (made only when clicked).

    A selectable chart's id includes its figure, so each new figure is a new widget, and Streamlit keeps
    the callback of every widget a session ever had; a page's own function as callback would keep that
    page run's variables (its tensors) alive for as long as the session lasts. So Streamlit gets a small
    dispatcher bound to the key, and the session keeps only the latest callback for each key."""
    if callable(on_select) and key:
        st.session_state.setdefault(CALLBACKS, {})[key] = on_select
        on_select = functools.partial(_on_select, key)
    if on_select is not None:
        kw["on_select"] = on_select
    fig = presenter.figure(fig)                               # ?present=1: as large as a projector's screen allows
    width = "content" if fig.layout.width else "stretch"      # a heatmap is as wide as its cells need
    out = st.plotly_chart(fig, theme=None, width=width, config=PLOTLY_CONFIG, key=key, **kw)
    if html:
        title = (fig.layout.title.text or "figure") if fig.layout.title else "figure"
        name = re.sub(r"[^\w]+", "-", title, flags=re.UNICODE).strip("-")[:60] or "figure"
        bkey = f"{key}__html" if key else "html_" + hashlib.sha1(title.encode()).hexdigest()[:12]
        st.download_button(t("fig.html"), data=lambda f=fig: _html(f), file_name=f"{name}.html",
                           mime="text/html", key=bkey, on_click="ignore", type="tertiary",
                           icon=":material/download:", help=t("fig.html_help"))
    return out


def intro(page: str, extra: Optional[str] = None, latex: Optional[str] = None, **kw) -> None:
    """A page's opening: its two or three sentences ("{page}.intro", formatted with kw), then its formula when
    it has one."""
    st.caption(t(f"{page}.intro", **kw))
    if extra:
        st.caption(t(extra, **kw))
    formula(latex or page)


def formula(key: str) -> None:
    """The formula of a page (strings.LATEX), when it has one."""
    if key in LATEX:
        st.latex(LATEX[key])


_MD_SPECIAL = "\\`*_{}[]()#+-.!|<>~$"


def output(text: str, key: str, where=None) -> None:
    """What a model said, as plain text (never Markdown or HTML) in a bordered box; its element has the class
    st-key-output_KEY. Not st.code: a page's first code block makes the browser load and run Streamlit's syntax
    highlighter, a cost every fresh visitor's first page would pay for a text that needs no highlighting
    (benchmarks/first_visit.py measures it). Code blocks stay for what one copies: links, the class key, errors."""
    with (where or st).container(border=True, key=f"output_{key}"):
        st.text(text)



def layers_label(cfg) -> str:
    """"6+6 layers", "6 layers": the encoder's and the decoder's layer counts as the model has them."""
    if cfg.is_encoder_decoder:
        return t("sidebar.layers_ed", enc=cfg.n_encoder_layers, dec=cfg.n_decoder_layers)
    if cfg.is_encoder_only:
        return t("sidebar.layers_e", enc=cfg.n_encoder_layers)
    return t("sidebar.layers_d", dec=cfg.n_decoder_layers)

def table(columns: dict, height: int = 600) -> None:
    """{header: values} as a static table with no index, scrolling under its header past `height` px: one block of
    escaped HTML (static_table), so a piece such as "*" or "<b>" shows as typed."""
    st.html(static_table.markup(columns, height))


def md_escape(s: str) -> str:
    """Text for st.markdown shown literally: markdown characters and < > are backslash-escaped."""
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in str(s))


def _html(fig) -> str:
    """The figure as a standalone page (export.figure_html), made when the button is clicked: export imports
    torch, which a fresh server is still importing while its first page is drawn."""
    from viz_transformer import export
    return export.figure_html(fig)
