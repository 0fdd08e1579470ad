"""The source and target languages of a multilingual translator (mBART, M2M100, NLLB): the session's choice per
folder, the model and cache key that carry it, the Overview's two selectors and the line that labels the pair.

The choice lives in st.session_state[CHOICE] ({folder: (source, target)}), never on the model, which every
session shares: the sidebar asks `choose` for this session's HookedModel (hm.with_languages) and cache key
(server.model_key), so runs of one pair are cached apart from another's. Without a choice the text decides:
Chinese text is read Chinese -> English.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import streamlit as st

from viz_explorer.kit.strings import t
from viz_explorer.server import model_key
from viz_explorer.server.cached import load_model
from viz_transformer.core.hf_languages import default_languages

CHOICE = "lang_pairs"          # session_state: folder -> (source, target) the user picked
SRC, TGT = "lang_src", "lang_tgt"


def pair_for(hm, folder, text: str) -> Optional[tuple[str, str]]:
    """The session's pair for this folder, else the text's default; None for a model without language codes."""
    if hm.languages is None:
        return None
    codes = hm.language_codes()
    picked = st.session_state.get(CHOICE, {}).get(str(folder))
    if picked and all(c in codes for c in picked):
        return tuple(picked)
    return default_languages(codes, text, {"src_lang": hm.languages[0], "tgt_lang": hm.languages[1]})


def choose(hm, folder, stamp: float, text: str):
    """(cache key, HookedModel) for this session: the folder and its model as loaded, or, for a multilingual
    translator, the key with the session's pair and the model read with it (the same weights)."""
    pair = pair_for(hm, folder, text)
    if pair is None:
        return Path(folder), hm
    key = model_key.with_pair(folder, pair)
    return Path(key), load_model(key, stamp)


def _picked(folder: str) -> None:
    st.session_state.setdefault(CHOICE, {})[folder] = (st.session_state[SRC], st.session_state[TGT])


def selectors(ctx) -> None:
    """The Overview's source and target selectors, for a model with language codes (nothing for others)."""
    pair = ctx.hm.languages
    if pair is None:
        return
    folder, codes = model_key.folder_of(ctx.path), ctx.hm.language_codes()
    st.session_state[SRC], st.session_state[TGT] = pair         # what this run was made with
    left, right = st.columns(2)
    left.selectbox(t("lang.src"), codes, key=SRC, on_change=_picked, args=(folder,), help=t("lang.help"))
    right.selectbox(t("lang.tgt"), codes, key=TGT, on_change=_picked, args=(folder,), help=t("lang.help"))


def label(hm) -> str:
    """"zho_Hans → eng_Latn" as a caption line, or "" for a model without language codes."""
    pair = hm.languages if hm is not None else None
    return t("lang.pair", src=pair[0], tgt=pair[1]) if pair else ""
