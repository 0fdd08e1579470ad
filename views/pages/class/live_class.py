"""Page: a live class. A teacher starts one on a lesson; students join with its code and answer each step's
question; the teacher's chart refreshes by itself (views/shell/live_class.py)."""
import streamlit as st

from views.shell import live_class
from views.shell.strings import t

st.title(t("lc.title"))
st.caption(t("lc.intro"))
live_class.show()
