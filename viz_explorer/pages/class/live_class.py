"""Page: a live class. A teacher starts one on a lesson; students join with its code and answer each step's
question; the teacher's chart refreshes by itself (viz_explorer/classroom/live_class.py). In presenter mode the teacher's
page is "present this class" (viz_explorer/classroom/class_present.py)."""
import streamlit as st

from viz_explorer.classroom import class_present, live_class
from viz_explorer.kit import presenter
from viz_explorer.kit.strings import t

if not presenter.active():
    st.title(t("lc.title"))
    st.caption(t("lc.intro"))
live_class.show(class_present.show if presenter.active() else live_class.teacher)
