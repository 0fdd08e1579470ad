"""The decoding page's step state: plain session keys, not widgets, so they survive page switches."""
from __future__ import annotations

import streamlit as st


def reset_steps_if_changed(key) -> None:
    """A new trace (other text, strategy or parameters) starts again from [begin]; the first trace of a
    view opened from a link or a lesson (dc_key None) keeps the step it was given."""
    if st.session_state.get("dc_key") != key:
        if st.session_state.get("dc_key") is not None:
            st.session_state["dc_step"] = 0
        st.session_state["dc_key"] = key
        st.session_state["dc_playing"] = False


def set_step(i: int) -> None:
    st.session_state["dc_step"] = max(0, i)
    st.session_state["dc_playing"] = False


def play() -> None:
    st.session_state["dc_playing"] = True


def pause() -> None:
    st.session_state["dc_playing"] = False
