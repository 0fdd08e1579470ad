"""Small widgets every page uses: pickers that survive a checkpoint change, heatmap windows, lazy tabs; and
(from viz_explorer/kit/page_parts.py, light enough for a fresh server's first page) figures with one config, a
page's intro and formula, markdown that shows user text literally."""
from __future__ import annotations

from typing import Optional, Sequence

import streamlit as st

from viz_explorer.kit import presenter, registry
from viz_explorer.kit.page_parts import formula, intro, md_escape, output, show, table  # noqa: F401  (widgets.show: the pages' name)
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.plots import figure_rules
from viz_transformer.plots.style import BIG_KEYS
from viz_transformer.core.hook_names import parse_prefix


def select(where, label: str, options: list, key: str, default=None, **kw):
    """A selectbox whose remembered value is reset when the options change (e.g. another checkpoint); its
    placeholder (shown while one types to search) in the interface's language, not Streamlit's English."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else options[0]
    kw.setdefault("placeholder", t("w.choose"))
    return where.selectbox(label, options, key=key, **kw)


def block_label(block: str) -> str:
    return t(f"block.{block}")


def prefix_label(prefix: str) -> str:
    """A block prefix in a table ("decoder.1.cross_attn", with its own layer column) as its block's label."""
    return block_label(parse_prefix(prefix)[0])


def head_label(h) -> str:
    return t(f"head.{h}") if isinstance(h, str) else t("at.head_n", h=h)


def query_axis(block: str) -> str:
    """The query axis title: a decoder row is named by its input and the token it predicts."""
    return t("axis.query" if block == "encoder.self_attn" else "axis.query_next")


def needs_decoder(cfg, page: str) -> None:
    """One line and the page ends, for a page that needs generation (a decoder) on an encoder-only model."""
    if cfg.is_encoder_only:
        st.info(t("msg.needs_decoder", page=t(page)), icon=":material/info:")
        st.stop()


def rows_note(run) -> None:
    """A page intro's one sentence on decoder rows, with a row of this run as its example (an encoder-only
    model has none: its sentence says attention runs both ways)."""
    if not run.tgt_pieces:
        st.caption(t("rows.encoder_only"))
        return
    row, piece = piece_labels.example_row(run.tgt_pieces, run.predicted, run.prompt_len - 1)
    st.caption(t("rows.intro", row=md_escape(row), piece=md_escape(piece)))


def block_layer_head(where_cols, cfg, prefix: str, with_reduce: bool = False, default_block: Optional[str] = None):
    """The (block, layer, head) pickers used by several pages. Keys are prefixed per page."""
    blocks = patterns.available_blocks(cfg)
    block = select(where_cols[0], t("block"), blocks, f"{prefix}_block", default_block, format_func=in_language(block_label))
    layer = select(where_cols[1], t("layer"), list(range(patterns.n_layers(cfg, block))), f"{prefix}_layer")
    heads = list(range(cfg.n_heads)) + (["mean", "max"] if with_reduce else [])
    head = select(where_cols[2], t("head"), heads, f"{prefix}_head", format_func=in_language(head_label))
    return block, layer, head


def play_pause(where, playing: bool, key: str, on_play, on_pause, args: tuple = (), disabled: bool = False) -> None:
    """Play while stopped, Pause while playing: two buttons with keys and callbacks of their own, not one that
    toggles. A click on a Pause the page still shows after the server has paused (a slow laptop or network, a
    second click because nothing seemed to happen) pauses again or does nothing; a toggle would play again."""
    if playing:
        where.button(t("dc.pause"), key=f"{key}_pause", on_click=on_pause, args=args, icon=":material/pause:")
    else:
        where.button(t("dc.play"), key=f"{key}_play", on_click=on_play, args=args, disabled=disabled,
                     icon=":material/play_arrow:")


def figure_columns(n: int, rows: int, cols: int, label_px: float = 150.0, labels: Sequence[str] = (),
                   colorbars: Sequence[str] = ()) -> tuple[list, int]:
    """Where n heatmaps of rows × cols go, and the width to build each one for: side by side while their
    cells stay readable (figure_rules.side_by_side, which measures the rows' labels and the colour bars' titles
    when given), else one under another at the full width; one under another while presenting (one figure to
    a screen, each as large as the screen allows)."""
    width = figure_rules.side_by_side(n, rows, cols, label_px, labels=labels, colorbars=colorbars)
    if presenter.active():
        return [st.container() for _ in range(n)], figure_rules.FIGURE_PX
    if n > 1 and width < figure_rules.figure_px():
        return list(st.columns(n)), width
    return [st.container() for _ in range(n)], width


def window(n_query: int, n_key: int, key: str, width: Optional[int] = None, where=None,
           pieces: Optional[list[str]] = None):
    """((qa, qb), (ka, kb)): all positions while a heatmap holds them at readable cells
    (figure_rules.max_cells), else a window of them with a slider to move it and a note of what is shown;
    with `pieces` (the longer axis's), a search box beside it jumps the window to a piece of the text."""
    size = figure_rules.max_cells(width)
    n = max(n_query, n_key)
    if n <= size:
        return (0, n_query), (0, n_key)
    box = where or st
    if pieces:
        box.text_input(t("fig.find"), key=f"{key}_find", on_change=_jump, args=(key, pieces, size, n),
                       help=t("fig.find_help"), placeholder=t("fig.find_placeholder"))
        missing = st.session_state.pop(f"{key}_missing", None)
        if missing:
            st.caption(t("fig.find_none", q=md_escape(missing)))
    start = box.slider(t("fig.window", m=size), 0, n - size, key=key)
    (qa, qb), (ka, kb) = patterns.axis_windows(n_query, n_key, start, size)
    st.caption(t("fig.window_note", qa=qa, qb=qb - 1, ka=ka, kb=kb - 1))
    return (qa, qb), (ka, kb)


def show_cell(n_query: int, n_key: int, key: str, cell: tuple[int, int]) -> None:
    """Before window(…, key): a newly picked cell (query, key) outside the shown window moves the window onto it
    (its key in the middle); a window the reader moved away from a cell picked before stays where it was put."""
    size, n = figure_rules.max_cells(), max(n_query, n_key)
    if n <= size or st.session_state.get(f"{key}_cell") == cell:
        return
    st.session_state[f"{key}_cell"] = cell
    (qa, qb), (ka, kb) = patterns.axis_windows(n_query, n_key, st.session_state.get(key, 0), size)
    if not (qa <= cell[0] < qb and ka <= cell[1] < kb):
        st.session_state[key] = max(0, min(cell[1] - size // 2, n - size))


def window_zmax(shown, n_keys: int):
    """The top of a window's weight scale (heatmaps.attention_heatmap's zmax): its own rule (0..1) while the whole
    matrix has few keys, else the window's largest weight (over thousands of keys weights are ~1/keys)."""
    return None if n_keys <= BIG_KEYS else float(shown.max()) or 1.0


def _jump(key: str, pieces: list[str], size: int, n: int) -> None:
    """The search box's callback: the window moves so the piece found sits in its middle."""
    query = st.session_state.get(f"{key}_find", "")
    at = piece_labels.find_piece(pieces, query)
    if at is None:
        st.session_state[f"{key}_missing"] = query.strip() or None
        return
    st.session_state[key] = max(0, min(at - size // 2, n - size))


# -- tabs whose content runs only when open ----------------------------------------------------------
TABS = dict(registry.TABBED.values())              # tab key prefix -> tab names


def tab_label(prefix: str, name: str) -> str:
    return t(f"{prefix}.tab.{name}")


def lazy_tabs(prefix: str) -> dict:
    """The tabs of a page with many figures, {name: container}; only the open one's content runs (and
    is drawn): the browser's time to draw a page grows with its figures, so a closed tab costs it nothing. Open tab
    in session_state[f"{prefix}_tab"] (its label); lessons choose it by name (viz_explorer/lessons/lesson_mode.py)."""
    names = TABS[prefix]
    return dict(zip(names, st.tabs([tab_label(prefix, n) for n in names], key=f"{prefix}_tab", on_change="rerun")))
