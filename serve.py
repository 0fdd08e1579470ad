"""The class server: `streamlit run serve.py` (or `python serve.py`), what deploy/serve.sh runs. The same app as
`streamlit run app.py`, with the same st.App: its lifespan starts the one start-up load (torch, the app's modules,
the default model: viz_explorer/startup/load.py) with the process, before the first visitor."""
import streamlit as st

from viz_explorer.server import threads
from viz_explorer.startup import load
from viz_explorer.classroom import class_routes

threads.apply()                  # before the lifespan's thread imports torch (viz_explorer/server/threads.py)
app = st.App("app.py", lifespan=load.lifespan, routes=class_routes.routes())

if __name__ == "__main__":
    app.run()
