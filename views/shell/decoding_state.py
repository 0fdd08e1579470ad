"""The decoding page's step state: plain session keys, not widgets, so they survive page switches."""
from __future__ import annotations

import streamlit as st


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
