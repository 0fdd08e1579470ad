"""The callbacks and option labels pages hand to Streamlit live here, not in the pages.

Streamlit keeps a widget's callbacks and format functions for as long as the session lasts. A function
defined in a page script refers to that page run's namespace, with every tensor and figure the run made,
so each session kept one dead namespace per page it had visited (250–300 MB at 512 tokens). These refer
to this module only; what they need comes in as arguments (functools.partial).
"""
from __future__ import annotations

from functools import partial

import streamlit as st

from viz_explorer.kit.strings import t


def _text(prefix: str, value) -> str:
    return t(f"{prefix}{value}")


def label(prefix: str):
    """format_func showing option v as the string t(prefix + v)."""
    return partial(_text, prefix)


def head_option(o) -> str:
    """(block, layer, head) as "encoder self-attention · layer 0 · head 3"."""
    return t("ex.head_option", block=t(f"block.{o[0]}"), layer=o[1], head=o[2])


# -- attention page: a click on the model view opens that head ------------------------------------------
def _open_head(n_heads: int) -> None:
    points = st.session_state["at_model_view"].selection.points
    if points:
        cd = points[0].get("customdata") or divmod(points[0]["point_index"], n_heads)
        st.session_state["at_layer"], st.session_state["at_head"] = int(cd[0]), int(cd[1])


def open_head(n_heads: int):
    return partial(_open_head, n_heads)


# -- head statistics: a click on a grid cell opens that head on the attention page ----------------------
def _open_stat(block: str, key: str) -> None:
    points = st.session_state[key].selection.points
    cells = [p["customdata"] for p in points if p.get("customdata")]
    if cells:
        st.session_state["hs_open"] = (block, int(cells[0][0]), int(cells[0][1]))


def open_stat(block: str, key: str = ""):
    """The click on a head grid of block kind `block` (the figure's key, default f"hs_grid_{block}")."""
    return partial(_open_stat, block, key or f"hs_grid_{block}")


# -- knock out heads -------------------------------------------------------------------------------------
def ko_cell(layer: int, head: int) -> str:
    return t("ko.cell", layer=layer, head=head)


def ko_add(block: str, cells) -> None:
    key = f"ko_pick_{block}"
    picked = list(st.session_state.get(key) or [])
    st.session_state[key] = picked + [c for c in (ko_cell(*c) for c in cells) if c not in picked]


def ko_clear(blocks) -> None:
    for block in blocks:
        st.session_state[f"ko_pick_{block}"] = []


def _ko_pick(block: str) -> None:
    points = st.session_state[f"ko_grid_{block}"].selection.points
    ko_add(block, [(int(p["customdata"][0]), int(p["customdata"][1])) for p in points if p.get("customdata")])


def ko_pick(block: str):
    return partial(_ko_pick, block)


# -- attention over training -----------------------------------------------------------------------------
def tr_set(n: int, k: int) -> None:
    st.session_state.update(tr_step=max(0, min(n - 1, k)), tr_playing=False)


def tr_slid(n: int) -> None:
    tr_set(n, st.session_state["tr_slider"])


def tr_play(i: int, n: int) -> None:
    """Play from the step shown, or from the first after the last."""
    st.session_state.update(tr_playing=True, tr_step=0 if i >= n - 1 else i)


def tr_pause(i: int, n: int) -> None:
    st.session_state["tr_playing"] = False


def _pair(texts, targets, k: int) -> str:
    return f"{texts[k]} → {targets[k]}" if targets[k] else texts[k]       # a masked LM's sentence has no reference


def snapshot_pair(snaps):
    return partial(_pair, snaps.texts, snaps.targets)


def _step(steps, shipped, k: int) -> str:
    return f"{steps[k]:,}" + (" ★" if steps[k] == shipped else "")


def snapshot_step(snaps):
    return partial(_step, snaps.steps, snaps.shipped_step)


# -- why this attention: a tap on the head's heatmap picks the cell; another query row picks its top key --------
def _why_cell() -> None:
    points = st.session_state["wy_heatmap"].selection.points
    cells = [p["customdata"] for p in points if p.get("customdata")]
    if cells:
        st.session_state["wy_q"], st.session_state["wy_k"] = int(cells[0][0]), int(cells[0][1])


def why_cell():
    return _why_cell


def why_row() -> None:
    st.session_state.pop("wy_k", None)          # the new row's top key, until one is picked


def _numbered(pieces: list, i) -> str:
    return f"{i}: {pieces[i]}" if isinstance(i, int) and 0 <= i < len(pieces) else str(i)


def numbered(pieces: list):
    """format_func showing position i as "i: piece"."""
    return partial(_numbered, list(pieces))


def _piece_or(none: str, tokenizer, i) -> str:
    return none if i is None else tokenizer.piece(i)


def piece_or(none: str, tokenizer):
    """format_func showing a token id as its piece, None as `none`."""
    return partial(_piece_or, none, tokenizer)
