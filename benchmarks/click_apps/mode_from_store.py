"""A minimal app for benchmarks/lost_clicks.py: a segmented control whose value is the store's, assigned before the
widget on every run (as the teacher's question mode is), its on_change writing the store; a busy run_every
fragment beside it. A click picks the option not chosen."""
import time
import streamlit as st


@st.cache_resource
def store():
    return {"mode": "one", "n": 0}


s = store()


def changed():
    s["mode"] = st.session_state.mode
    s["n"] += 1


st.session_state["mode"] = s["mode"]
st.segmented_control("Mode", ["one", "peer"], required=True, key="mode", on_change=changed)
st.markdown(f"clicks: {s['n']}")


@st.fragment(run_every=0.3)
def live():
    time.sleep(0.2)                       # the fragment is running most of the time, as a busy chart is
    st.caption(time.strftime("%H:%M:%S"))


live()
