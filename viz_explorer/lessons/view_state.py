"""What a page's view is made of: the settings in the app's own words (viz_explorer.lessons.lesson_file.SETTINGS)
and the session-state keys of the widgets that show them, in one table. Lessons apply and save steps
through it (viz_explorer/lessons/lesson_mode.py), links write and open views through it (viz_explorer/lessons/links.py).

A key may name the checkpoint's shape ({kind}: translator or lm; {d_head}, {max_len}: the model's): such a
setting needs the model (`fields(cfg)`) to find its key; without it, it is left out.
"""
from __future__ import annotations

from typing import Optional

import streamlit as st

from viz_explorer.lessons import lesson_file
from viz_explorer.kit import registry, widgets
from viz_explorer.kit.strings import t

# pages with the block/layer/head pickers of widgets.block_layer_head: page -> their key prefix
PICKERS = {"attention": "at", "step_by_step": "st", "knockout": "ko", "compare": "cp", "positions": "po",
           "masks": "mk", "training": "tr", "why": "wy"}
PICKER_BLOCK = {"step_by_step": "decoder.self_attn", "masks": "decoder.self_attn", "training": "decoder.self_attn",
                "why": "decoder.cross_attn"}
# setting -> page ("*": every page) -> session-state key
KEYS = {"checkpoint": {"*": "ckpt"}, "text": {"*": "text"}, "words": {"attention": "at_words"},
        "no_sink": {"attention": "at_no_sink"},
        "row": {"step_by_step": "st_row", "why": "wy_q"}, "key": {"why": "wy_k"}, "divisor": {"step_by_step": "st_div_{d_head}"},
        "strategy": {"decoding": "dc_strategy"}, "layer": {"decoding": "dc_layer"},
        "max_new_tokens": {"decoding": "dc_max_new"}, "beam_width": {"decoding": "dc_width"},
        "temperature": {"decoding": "dc_temp"}, "top_k": {"decoding": "dc_top_k"}, "top_p": {"decoding": "dc_top_p"},
        "seed": {"decoding": "dc_seed"}, "decode_step": {"decoding": "dc_step"},
        "ablate_mode": {"knockout": "ko_mode"}, "permutation": {"positions": "po_how"},
        "other_text": {"compare": "cp_text_{kind}", "patching": "pt_text_{kind}"},
        "over": {"patching": "pt_over"}, "lens_step": {"lens": "ln_step"}, "prefix_len": {"masks": "mk_prefix"},
        "positions": {"positional": "pe_n_{max_len}"}, "depth": {"architectures": "ar_depth"},
        "source": {"head_stats": "hs_source"}, "stat": {"head_stats": "hs_stat"},
        "threshold": {"head_stats": "hs_threshold"},
        "snapshot": {"training": "tr_step"}, "sentence": {"training": "tr_text"}}
# a page resets some positions when its input changes (a new trace, sentence, checkpoint); the key that
# remembers that input set to None means "no input yet: keep the position you are given"
KEEP = {"decode_step": "dc_key", "prefix_len": "mk_prefix_for", "snapshot": "tr_key", "row": "wy_for", "key": "wy_for"}
TABBED = {page: prefix for page, (prefix, _) in registry.TABBED.items()}   # page -> widgets.lazy_tabs prefix
KINDS = ("translator", "lm")
ABLATE_BLOCKS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")


def fields(cfg) -> dict:
    """The model's numbers that widget keys are named by."""
    return {"d_head": cfg.d_head, "max_len": cfg.max_len}


def _names(where: str, kind: Optional[str], shape: Optional[dict]) -> list[str]:
    """The session keys of a KEYS entry: every kind's when `kind` is None; none when it needs the model's shape
    and `shape` is None."""
    try:
        return [where.format(kind=k, **(shape or {})) for k in ((kind,) if kind else KINDS)]
    except KeyError:
        return []


def session_values(page: str, settings: dict, shape: Optional[dict] = None) -> dict:
    """The session-state keys and values that show `settings` on `page` (`shape`: fields(cfg))."""
    out = {}
    for key, value in settings.items():
        if key in ("block", "layer", "head") and page in PICKERS:
            out[f"{PICKERS[page]}_{key}"] = value
        elif key == "tab" and page in TABBED:
            if value in widgets.TABS[TABBED[page]]:
                out[f"{TABBED[page]}_tab"] = widgets.tab_label(TABBED[page], value)
        elif key == "ablate" and page == "knockout":
            for block in ABLATE_BLOCKS:
                out[f"ko_pick_{block}"] = [t("ko.cell", layer=int(p.split(".")[1]), head=h) for p, h in value
                                           if f"{p.split('.')[0]}.{p.split('.')[2]}" == block]
        elif key in KEYS:
            where = KEYS[key].get(page, KEYS[key].get("*"))
            for name in _names(where, None, shape) if where else ():
                out[name] = value
                if key in KEEP:
                    out[KEEP[key]] = None
    return out


def current_settings(page: str, kind: str, shape: Optional[dict] = None) -> dict:
    """The settings of `page` as the session holds them now (what "save as lesson step" records, what a
    link carries); only valid ones."""
    state, out = st.session_state, {}
    for key, where in KEYS.items():
        template = where.get(page, where.get("*"))
        for name in _names(template, kind, shape) if template else ():
            if state.get(name) is not None:
                out[key] = state[name]
    if page in PICKERS:
        for key in ("block", "layer", "head"):
            value = state.get(f"{PICKERS[page]}_{key}")
            if isinstance(value, (str, int)) and not (key == "head" and isinstance(value, str)):
                out[key] = value
    if page in TABBED:
        prefix = TABBED[page]
        names = {widgets.tab_label(prefix, n): n for n in widgets.TABS[prefix]}
        if state.get(f"{prefix}_tab") in names:
            out["tab"] = names[state[f"{prefix}_tab"]]
    if page == "knockout":
        cells = {t("ko.cell", layer=layer, head=h): (layer, h) for layer in range(64) for h in range(64)}
        out["ablate"] = [[f"{b.split('.')[0]}.{cells[c][0]}.{b.split('.')[1]}", cells[c][1]]
                         for b in ABLATE_BLOCKS for c in state.get(f"ko_pick_{b}") or [] if c in cells]
    try:
        return lesson_file.check_settings(out, "this page")
    except ValueError:           # e.g. an empty text: keep what is valid
        return {k: v for k, v in out.items() if valid(k, v)}


def valid(key: str, value) -> bool:
    try:
        lesson_file.check_settings({key: value}, "")
        return True
    except ValueError:
        return False
