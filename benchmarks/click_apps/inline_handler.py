"""A minimal app for benchmarks/lost_clicks.py."""
import time
import streamlit as st
st.session_state.setdefault("n", 0)
if st.button("Next", key="next"):
    st.session_state.n += 1
time.sleep(0.3)                           # the rest of the page takes a while, as the class page does
st.markdown(f"clicks: {st.session_state.n}")
@st.fragment(run_every=0.3)
def live():
    time.sleep(0.2)
    st.caption(time.strftime("%H:%M:%S"))
live()
