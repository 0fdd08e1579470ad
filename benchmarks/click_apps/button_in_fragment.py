"""A minimal app for benchmarks/lost_clicks.py."""
import time
import streamlit as st
st.session_state.setdefault("n", 0)
def inc():
    st.session_state.n += 1
@st.fragment(run_every=0.3)
def live():
    st.button("Next", key="next", on_click=inc)   # inside the fragment that reruns by itself
    time.sleep(0.2)
    st.markdown(f"clicks: {st.session_state.n}")
live()
