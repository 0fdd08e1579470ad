"""viz_transformer's explorer: `streamlit run app.py`, then open the printed URL.

This file owns what every page shares (the sidebar: checkpoint, text, the cached run) and the
navigation; each page in views/ reads the shared Context with views.context.need_run().
The folder is deliberately not called pages/: a pages/ folder beside the entrypoint switches
Streamlit to its legacy multipage mode until st.navigation first runs, so a deep link opened
first after a restart (and every AppTest rerun) would run the page without this file.
"""
import streamlit as st

from views import context, guard, sidebar
from views.strings import t

st.set_page_config(page_title=t("app.title"), page_icon=":material/search:", layout="wide")

PAGES = [st.Page("views/overview.py", title=t("nav.overview"), icon=":material/info:", default=True),
         st.Page("views/attention.py", title=t("nav.attention"), icon=":material/grid_view:"),
         st.Page("views/step_by_step.py", title=t("nav.steps"), icon=":material/calculate:"),
         st.Page("views/masks.py", title=t("nav.masks"), icon=":material/visibility_off:"),
         st.Page("views/positional.py", title=t("nav.positional"), icon=":material/waves:"),
         st.Page("views/decoding.py", title=t("nav.decoding"), icon=":material/skip_next:"),
         st.Page("views/knockout.py", title=t("nav.knockout"), icon=":material/block:"),
         st.Page("views/positions.py", title=t("nav.positions"), icon=":material/swap_horiz:"),
         st.Page("views/compare.py", title=t("nav.compare"), icon=":material/compare:")]

page = st.navigation(PAGES)
guard.clean_text()
with guard.healing(page.title):
    st.session_state[context.CTX] = sidebar.sidebar()
    page.run()
