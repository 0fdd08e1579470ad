"""A minimal app for benchmarks/lost_clicks.py."""
import time
import streamlit as st
st.session_state.setdefault("n", 0)
def inc():
    st.session_state.n += 1
st.button("Next", key="next", on_click=inc)
st.markdown(f"clicks: {st.session_state.n}")
@st.fragment(run_every=0.3)
def live():
    time.sleep(0.2)                       # the fragment is running most of the time, as a busy chart is
    st.caption(time.strftime("%H:%M:%S"))
live()
