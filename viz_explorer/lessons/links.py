"""A link to any view: every page keeps its settings in the address as they change, the sidebar's "Copy
link" hands the address out, and opening it in a fresh browser shows the same view.

The query holds the settings in the app's own words (viz_explorer.lessons.lesson_file.SETTINGS: `?checkpoint=zh-en
&block=decoder.cross_attn&layer=1&head=3`), only those that differ from a fresh page's; the page is the
address's path, the language `lang`, a lesson `lesson` and `step` (lesson mode owns those). A text whose
address would be long is stored in the database (viz_explorer/server/db.py) and the link carries its short id
(`tid=`, `other_tid=`). A value that is unknown, malformed or out of this model's range is left at its
default, with one line saying so; nothing raises.

app.py calls open_link before the sidebar (checkpoint and text of the link, on a session's first run),
apply after it (the page's settings, checked against the loaded model) and share before the page.
"""
from __future__ import annotations

import functools
import math
import re
from typing import Callable, Mapping, Optional
from urllib.parse import quote, urlencode

import streamlit as st

from viz_explorer.lessons import lesson_file
from viz_explorer.kit import session_guard, widgets
from viz_explorer.kit.strings import t
from viz_explorer.lessons.view_state import (PICKER_BLOCK, PICKERS, TABBED, current_settings, fields, session_values,
                                    valid)
from viz_transformer.analysis import mask_examples, piece_labels
from viz_transformer.analysis.summaries import ROLE_THRESHOLD
from viz_transformer.core.hook_names import available_blocks, n_layers, parse_prefix

SETTINGS = lesson_file.SETTINGS
TEXT_IDS = {"text": "tid", "other_text": "other_tid"}      # a long text goes by its id in the database
LONG = 300                  # characters of a text's URL-encoded form beyond which the link carries its id
KEPT = ("lang", "lesson", "step")      # the app's other parameters a link carries; nothing else (no secrets)
OURS = frozenset(SETTINGS) | frozenset(TEXT_IDS.values())
# what a fresh page shows: these are left out of a link (tests/test_links.py checks them against the pages)
DEFAULTS = {"words": False, "no_sink": False, "strategy": "greedy", "max_new_tokens": 20, "beam_width": 4,
            "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 0, "decode_step": 0, "ablate": [],
            "ablate_mode": "zero", "permutation": "reverse", "over": "heads", "depth": "last", "source": "text",
            "threshold": ROLE_THRESHOLD, "snapshot": 0, "sentence": 0}
SAMPLING = ("temperature", "top_k", "top_p", "seed")     # only read when the strategy samples
FIRST, PENDING = "_link_opened", "_link_pending"
INT = re.compile(r"^-?\d{1,10}$")


# -- settings <-> query (pure) -----------------------------------------------------------------------------
def _number(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def encode(key: str, value) -> str:
    """One setting's value as the query writes it."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if key == "ablate":
        return ",".join(f"{prefix}:{head}" for prefix, head in value)
    return _number(value) if isinstance(value, (int, float)) else str(value)


def decode(key: str, raw: str):
    """A query value as a setting's value; ValueError when it is not one."""
    typ = SETTINGS[key][0]
    if typ is bool:
        if raw.lower() not in ("1", "0", "true", "false"):
            raise ValueError(raw)
        return raw.lower() in ("1", "true")
    if typ is int:
        if not INT.match(raw):
            raise ValueError(raw)
        return int(raw)
    if typ == (int, float):
        v = float(raw)
        if not math.isfinite(v):
            raise ValueError(raw)
        return v
    if typ is list:          # ablate: "decoder.1.cross_attn:3,encoder.0.self_attn:2"
        out = []
        for part in filter(None, raw.split(",")):
            prefix, _, head = part.rpartition(":")
            parse_prefix(prefix)
            if not INT.match(head):
                raise ValueError(part)
            out.append([prefix, int(head)])
        return out
    return raw


def to_query(settings: dict, store: Callable[[str], str]) -> dict[str, str]:
    """The query of a view's settings: defaults left out, a long text by its id (`store(text) -> id`; a text
    that cannot be stored goes in whole)."""
    out = {}
    for key, value in settings.items():
        if DEFAULTS.get(key, ...) == value or (key in SAMPLING and settings.get("strategy") != "sample") \
                or (key == "beam_width" and settings.get("strategy") != "beam"):
            continue
        if key in TEXT_IDS and len(quote(value)) > LONG:
            try:
                out[TEXT_IDS[key]] = store(value)
                continue
            except Exception:    # noqa: BLE001 - no database: the link is long, not broken
                pass
        out[key] = encode(key, value)
    return out


def _shown(key: str, raw: str) -> str:
    return f"{key}={raw if len(raw) <= 24 else raw[:23] + '…'}"


def from_query(query: Mapping[str, str], load: Callable[[str], Optional[str]]) -> tuple[dict, list[str]]:
    """(the settings a query names, what was ignored as "key=value"): each value decoded and checked against
    SETTINGS; a text id looked up with `load(id) -> text or None`. Unknown parameters are not ours: skipped."""
    settings, ignored = {}, []
    for key, raw in query.items():
        if key in TEXT_IDS.values():
            setting = next(k for k, v in TEXT_IDS.items() if v == key)
            text = load(raw)
            if text is None or not valid(setting, text):
                ignored.append(_shown(key, raw))
            elif setting not in query:             # a text given in full wins over an id
                settings[setting] = text
            continue
        if key not in SETTINGS:
            continue
        try:
            value = decode(key, raw)
        except ValueError:
            value = None
        if value is None or not valid(key, value):
            ignored.append(_shown(key, raw))
        else:
            settings[key] = value
    return settings, ignored


def fit(page: str, settings: dict, cfg, run, state: Mapping) -> tuple[dict, list[str]]:
    """(the settings this model can show on `page`, those it cannot as "key=value"): blocks the architecture
    has, layers and heads within its counts, a tab of this page, a row within the text."""
    kept, dropped = dict(settings), []

    def drop(key):
        dropped.append(_shown(key, encode(key, kept.pop(key))))

    blocks = available_blocks(cfg)
    if page in PICKERS:
        if kept.get("block", blocks[0]) not in blocks:
            drop("block")
        remembered = state.get(f"{PICKERS[page]}_block")
        block = kept.get("block") or next(b for b in (remembered, PICKER_BLOCK.get(page), blocks[0]) if b in blocks)
        if kept.get("layer", 0) >= n_layers(cfg, block):
            drop("layer")
        if kept.get("head", 0) >= cfg.n_heads:
            drop("head")
        if page == "step_by_step" and run is not None and kept.get("row", 0) >= len(piece_labels.query_labels(run, block)):
            drop("row")
    elif page == "decoding" and kept.get("layer", 0) >= cfg.n_decoder_layers:
        drop("layer")
    if page in TABBED and "tab" in kept and kept["tab"] not in widgets.TABS[TABBED[page]]:
        drop("tab")
    if page == "knockout" and "ablate" in kept:          # the heads this model has stay knocked out
        fits = [(prefix, head, parse_prefix(prefix)) for prefix, head in kept["ablate"]]
        fits = [(prefix, head, b in blocks and layer < n_layers(cfg, b) and head < cfg.n_heads)
                for prefix, head, (b, layer) in fits]
        kept["ablate"] = [[prefix, head] for prefix, head, ok in fits if ok]
        dropped += [_shown("ablate", f"{prefix}:{head}") for prefix, head, ok in fits if not ok]
    if page == "decoding" and kept.get("top_k", 0) > cfg.vocab_size:
        drop("top_k")
    if page == "positional" and not min(8, cfg.max_len - 1) <= kept.get("positions", cfg.max_len) <= cfg.max_len:
        drop("positions")
    if page == "masks" and run is not None and kept.get("prefix_len", 1) > len(mask_examples.prefix_lm_layout(run)[0]):
        drop("prefix_len")
    return kept, dropped


def address(base: str, query: Mapping[str, str]) -> str:
    """The link: the page's address and its query, escaped."""
    return f"{base}?{urlencode(query, quote_via=quote)}" if query else base


# -- the app's hooks ---------------------------------------------------------------------------------------
def _load_text(tid: str) -> Optional[str]:
    from viz_explorer.server import db
    try:
        return db.get_text(tid)
    except Exception:    # noqa: BLE001 - no database here: the id cannot be resolved
        return None


@functools.lru_cache(maxsize=256)          # the address is written on every rerun: store a text once
def _store_text(text: str) -> str:
    from viz_explorer.server import db
    return db.put_text(text)


def open_link(page: str, checkpoints: Callable[[], list[str]]) -> None:
    """On a session's first run: the link's checkpoint and text go into the session before the sidebar
    reads them; the page's own settings wait for the model (apply)."""
    state = st.session_state
    if state.get(FIRST):
        return
    state[FIRST] = True
    settings, ignored = from_query(st.query_params.to_dict(), _load_text)
    if not settings and not ignored:
        return
    if "checkpoint" in settings:
        name = settings.pop("checkpoint")
        if name in checkpoints():
            state["ckpt"] = name
        else:
            ignored.append(_shown("checkpoint", name))
    if "text" in settings:
        state["text"] = settings.pop("text")
        session_guard.clean_text()               # as a typed text: one Streamlit can send back
    state[PENDING] = (page, settings, ignored)


def apply(page: str, ctx) -> None:
    """After the sidebar, on the link's first run: its settings for this page, those this model can show, and
    one line naming what was left at its default."""
    pending = st.session_state.pop(PENDING, None)
    if pending is None:
        return
    where, settings, ignored = pending
    if where == page and ctx.hm is not None:
        kept, dropped = fit(page, settings, ctx.hm.cfg, ctx.run, st.session_state)
        st.session_state.update(session_values(page, kept, fields(ctx.hm.cfg)))
        ignored = ignored + dropped
    if ignored:
        st.info(t("link.ignored", what=widgets.md_escape(", ".join(ignored))), icon=":material/link_off:")


def share(page: str, ctx) -> str:
    """Write this view's settings into the address bar (the app's other parameters stay) and show the
    "Copy link" box at the bottom of the sidebar. Returns the link."""
    shape = fields(ctx.hm.cfg) if ctx.hm is not None else None
    query = to_query(current_settings(page, ctx.kind, shape), _store_text)
    now = st.query_params.to_dict()
    for key in now:
        if key in OURS and key not in query:
            del st.query_params[key]
    changed = {k: v for k, v in query.items() if now.get(k) != v}
    if changed:
        st.query_params.update(changed)
    kept = {k: st.query_params[k] for k in KEPT if k in st.query_params}
    link = address(st.context.url or "", {**kept, **query})
    with st.sidebar.popover(t("link.copy"), icon=":material/link:", width="stretch"):
        st.caption(t("link.help"))
        st.code(link, language=None, wrap_lines=True)
    return link
