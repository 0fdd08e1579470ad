"""The interface language: ?lang=zh|en in the URL (a teacher can hand out a link) and a sidebar switch,
both kept in st.session_state["lang"], which viz_explorer.kit.strings.t reads. Switching reruns the same page
with the same text and model (the widgets keep their keys)."""
from __future__ import annotations

import streamlit as st

from viz_explorer.kit.strings import LANGS, LANG_KEY, t


def resolve() -> str:
    """Call first in app.py: a ?lang= in the URL wins, else the session's choice, else English."""
    asked = st.query_params.get("lang")
    if asked in LANGS:
        st.session_state[LANG_KEY] = asked
    elif st.session_state.get(LANG_KEY) not in LANGS:
        st.session_state[LANG_KEY] = "en"
    st.query_params["lang"] = st.session_state[LANG_KEY]   # the address bar always holds a shareable link
    return st.session_state[LANG_KEY]


def _changed() -> None:
    st.query_params["lang"] = st.session_state[LANG_KEY]


def switch() -> None:
    """The sidebar control (English / 简体中文)."""
    st.sidebar.segmented_control(t("sidebar.lang"), list(LANGS), key=LANG_KEY, format_func=LANGS.get,
                                 required=True, on_change=_changed)
