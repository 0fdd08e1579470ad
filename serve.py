"""The class server: `streamlit run serve.py` (or `python serve.py`) serves the same app as
`streamlit run app.py`, same pages and addresses, but gets ready before its first visitor: st.App's
lifespan starts torch, the app's modules and the default model in a thread (viz_explorer/startup/prestart.py).
deploy/serve.sh runs this. `streamlit run app.py` keeps working as before (it loads all that on the first
visit instead)."""
import streamlit as st

from viz_explorer.server import threads
from viz_explorer.startup import prestart

threads.apply()                  # before the lifespan's thread imports torch (viz_explorer/server/threads.py)
app = st.App("app.py", lifespan=prestart.lifespan)

if __name__ == "__main__":
    app.run()
