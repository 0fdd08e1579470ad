"""A link to any view: every page keeps its settings in the address as they change, the sidebar's "Copy
link" hands the address out, and opening it in a fresh browser shows the same view.

The query holds the settings in the app's own words (viz_explorer.lessons.lesson_file.SETTINGS: `?checkpoint=zh-en
&block=decoder.cross_attn&layer=1&head=3`), only those that differ from a fresh page's; the page is the
address's path, the language `lang`, a lesson `lesson` and `step` (lesson mode owns those). A text whose
address would be long stays in the session and out of the address until the person asks for a link ("Make the
link"): then it is stored (viz_explorer/server/texts.py: a random id, limits, an expiry) and the address carries
its id (`tid=`, `other_tid=`). A value that is unknown, malformed or out of this model's range is left at its
default, with one line saying so; an expired text's link says so; nothing raises.

app.py calls open_link before the sidebar (checkpoint and text of the link, on a session's first run),
apply after it (the page's settings, checked against the loaded model) and share before the page.
"""
from __future__ import annotations

import math
import re
import secrets
from typing import TYPE_CHECKING, Callable, Mapping

if TYPE_CHECKING:
    from viz_explorer.server.texts import Lookup
from urllib.parse import quote, urlencode

import streamlit as st

from viz_explorer.lessons import lesson_file
from viz_explorer.kit import cookie, session_guard, widgets
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
STORED = "_link_stored"         # session_state: {text: id} of the long texts this session made a link for
REFUSED = "_link_refused"       # session_state: why the last "Make the link" stored nothing (TextRefused's key, kw)
BROWSER = "viz_browser"         # cookie: this browser's random id, what the stores-per-minute limit counts
BROWSER_S = 30 * 86400
WROTE = "_link_cookie"          # session_state: this session has written the cookie
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


def long(text: str) -> bool:
    """Whether a text is too long for an address: the link carries it by its stored id."""
    return len(quote(text)) > LONG


def to_query(settings: dict, ids: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the query of a view's settings, the long texts' keys not in it): defaults left out, a long text by its id in
    `ids` ({text: id}, the texts stored for a link), else not in the address at all."""
    out, waiting = {}, []
    for key, value in settings.items():
        if DEFAULTS.get(key, ...) == value or (key in SAMPLING and settings.get("strategy") != "sample") \
                or (key == "beam_width" and settings.get("strategy") != "beam"):
            continue
        if key in TEXT_IDS and long(value):
            if value in ids:
                out[TEXT_IDS[key]] = ids[value]
            else:
                waiting.append(key)
            continue
        out[key] = encode(key, value)
    return out, waiting


def _shown(key: str, raw: str) -> str:
    return f"{key}={raw if len(raw) <= 24 else raw[:23] + '…'}"


def from_query(query: Mapping[str, str], load: Callable[[str], "Lookup"]) -> tuple[dict, list[str], list[str]]:
    """(the settings a query names, what was ignored as "key=value", the text ids that have expired): each value
    decoded and checked against SETTINGS; a text id looked up with `load(id) -> Lookup` (viz_explorer/server/texts.py). Unknown
    parameters are not ours: skipped."""
    settings, ignored, expired = {}, [], []
    for key, raw in query.items():
        if key in TEXT_IDS.values():
            setting = next(k for k, v in TEXT_IDS.items() if v == key)
            found = load(raw)
            if found.status == "expired":
                expired.append(key)
            elif found.status != "ok" or not valid(setting, found.text):
                ignored.append(_shown(key, raw))
            elif setting not in query:             # a text given in full wins over an id
                settings[setting] = found.text
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
    return settings, ignored, expired


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
        if page in ("step_by_step", "why") and run is not None:
            q_pieces, k_pieces = piece_labels.block_pieces(run, block)
            if kept.get("row", 0) >= len(q_pieces):
                drop("row")
            if kept.get("key", 0) >= len(k_pieces):
                drop("key")
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
def _load_text(tid: str):
    from viz_explorer.server import texts
    return texts.get(tid)


def open_link(page: str, checkpoints: Callable[[], list[str]]) -> None:
    """On a session's first run: the link's checkpoint and text go into the session before the sidebar
    reads them; the page's own settings wait for the model (apply)."""
    state = st.session_state
    if state.get(FIRST):
        return
    state[FIRST] = True
    settings, ignored, expired = from_query(st.query_params.to_dict(), _load_text)
    if not settings and not ignored and not expired:
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
    state[PENDING] = (page, settings, ignored, expired)


def apply(page: str, ctx) -> None:
    """After the sidebar, on the link's first run: its settings for this page, those this model can show, and
    one line naming what was left at its default, one saying a text has expired."""
    pending = st.session_state.pop(PENDING, None)
    if pending is None:
        return
    where, settings, ignored, expired = pending
    if where == page and ctx.hm is not None:
        kept, dropped = fit(page, settings, ctx.hm.cfg, ctx.run, st.session_state)
        st.session_state.update(session_values(page, kept, fields(ctx.hm.cfg)))
        ignored = ignored + dropped
    if expired:
        from viz_explorer.server import texts
        st.info(t("link.expired", days=texts.limits().days), icon=":material/history:")
    if ignored:
        st.info(t("link.ignored", what=widgets.md_escape(", ".join(ignored))), icon=":material/link_off:")


def browser_id() -> str:
    """This browser's random id (cookie BROWSER), else this session's until the cookie is written."""
    kept = st.context.cookies.get(BROWSER)
    if isinstance(kept, str) and cookie.SAFE.match(kept) and len(kept) >= 16:
        return kept
    return st.session_state.setdefault(BROWSER, secrets.token_urlsafe(16))


def _make_link(waiting: dict[str, str]) -> None:
    """"Make the link": store the view's long texts; their ids go into the address on this run."""
    from viz_explorer.server import texts
    stored = st.session_state.setdefault(STORED, {})
    st.session_state.pop(REFUSED, None)
    try:
        for text in waiting.values():
            if text not in stored:
                stored[text] = texts.put(text, browser_id())
    except texts.TextRefused as e:
        st.session_state[REFUSED] = (e.key, e.kw)


def share(page: str, ctx) -> str:
    """Write this view's settings into the address bar (the app's other parameters stay) and show the
    "Copy link" box at the bottom of the sidebar: the link, or for a view with a long text, the button that
    stores it. Returns the address (without a long text that was not stored)."""
    shape = fields(ctx.hm.cfg) if ctx.hm is not None else None
    settings = current_settings(page, ctx.kind, shape)
    query, waiting = to_query(settings, st.session_state.get(STORED, {}))
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
        if waiting:
            from viz_explorer.server import texts
            st.caption(t("link.store_help", days=texts.limits().days))
            st.button(t("link.make"), key="link_make", icon=":material/add_link:",
                      on_click=_make_link, args=({k: settings[k] for k in waiting},))
            refused = st.session_state.get(REFUSED)
            if refused is not None:
                st.error(t(f"link.err.{refused[0]}", **refused[1]))
        else:
            kept_days = ""
            if any(k in query for k in TEXT_IDS.values()):
                from viz_explorer.server import texts
                kept_days = " " + t("link.kept", days=texts.limits().days)
            st.caption(t("link.help") + kept_days)
            st.code(link, language=None, wrap_lines=True)
    if st.session_state.get(STORED) and not st.session_state.get(WROTE):
        st.session_state[WROTE] = True
        cookie.write(BROWSER, browser_id(), BROWSER_S)
    return link
