"""viz_transformer's explorer: `streamlit run app.py`, then open the printed URL.

This file owns what every page shares (the sidebar: checkpoint, text, the cached run) and the
navigation; each page in pages/ reads the shared Context with pages.common.need_run().
"""
import streamlit as st

from pages import common
from pages.strings import t

st.set_page_config(page_title=t("app.title"), page_icon=":material/search:", layout="wide")

PAGES = [st.Page("pages/overview.py", title=t("nav.overview"), icon=":material/info:", default=True),
         st.Page("pages/attention.py", title=t("nav.attention"), icon=":material/grid_view:"),
         st.Page("pages/step_by_step.py", title=t("nav.steps"), icon=":material/calculate:"),
         st.Page("pages/masks.py", title=t("nav.masks"), icon=":material/visibility_off:"),
         st.Page("pages/positional.py", title=t("nav.positional"), icon=":material/waves:"),
         st.Page("pages/decoding.py", title=t("nav.decoding"), icon=":material/skip_next:")]

page = st.navigation(PAGES)
st.session_state[common.CTX] = common.sidebar()
page.run()
