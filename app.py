"""viz_transformer's explorer: `streamlit run app.py`, then open the printed URL.

This file owns what every page shares (the language, the sidebar: checkpoint, text, the cached run) and
the navigation, grouped by what a student does (the pages are listed in viz_explorer/kit/registry.py); each page in
viz_explorer/pages/ reads the shared Context with viz_explorer.kit.context.need_run(). Add ?lang=zh to the address for the
Chinese interface. Every page keeps its view in the address (viz_explorer/lessons/links.py): a copied link opens
the same view. The pages live in viz_explorer/pages/, not in a pages/ folder beside this file: that switches
Streamlit to its legacy multipage mode until st.navigation first runs, so a deep link opened
first after a restart (and every AppTest rerun) would run the page without this file.
"""
from pathlib import Path

import streamlit as st

from viz_explorer.server import threads
from viz_explorer.startup import warmup
from viz_explorer.kit import language, presenter, registry
from viz_explorer.startup import preview
from viz_explorer.kit.strings import t

threads.apply()                  # before anything imports torch: its intra-op threads (viz_explorer/server/threads.py)
language.resolve()
ICON = str(Path(__file__).resolve().parent / "views" / "icon.png")      # shipped: a :material: page icon is an SVG
presenter.resolve()                                                      # ?present=1: a projected class
st.set_page_config(page_title=t("app.title"), page_icon=ICON, layout="wide",    # fetched from fonts.gstatic.com
                   initial_sidebar_state=presenter.sidebar_state())
presenter.style()


def page(spec: registry.PageSpec) -> st.Page:
    return st.Page(registry.page_path(spec), title=t(spec.title), icon=f":material/{spec.icon}:",
                   url_path="" if spec.name == registry.DEFAULT else spec.name, default=spec.name == registry.DEFAULT)


SECTIONS = {t(group): [page(spec) for spec in specs] for group, specs in registry.SECTIONS.items()}
LESSON_PAGES = {spec.name: p for spec, p in zip(registry.PAGES, (p for g in SECTIONS.values() for p in g))}

first = st.empty()                                    # every run's first element: see viz_explorer/startup/preview.py
sent = warmup.plotly_first(first)                     # a fresh server: plotly.js loads before anything else
current = st.navigation(SECTIONS, expanded=True)      # every page listed, none behind "View more"
language.switch()
if preview.shown(current, first, sent):   # a fresh server's Overview: what needs no model, at once; the full
    st.stop()                             # page follows by itself when the model is ready
first.empty()
early = warmup.plotly_early(t("warmup.loading"))   # a fresh server: plotly.js loads while torch is imported
try:
    from viz_explorer.server import memory  # noqa: E402  (these import torch)
    from viz_explorer.kit import context, session_guard, sidebar
    from viz_explorer.lessons import lesson_mode, links
    from viz_explorer.classroom import live_class  # noqa: E402
finally:
    warmup.imported(early)
session_guard.clean_text()
live_class.remember()                                      # ?class=CODE&me=ID: this session is that student
lesson_mode.before_sidebar(current, LESSON_PAGES)          # ?lesson=NAME: apply its step, show its note
live_class.follow_lesson()                                 # a teacher's lesson moves their class
name = current.url_path or registry.DEFAULT
links.open_link(name, sidebar.checkpoint_names)            # a link's first run: its checkpoint and text
presenter.page_steps(current, LESSON_PAGES)                # ?present=1 without a lesson: ← / → go through the pages
try:
    with session_guard.healing(current.title):
        st.session_state[context.CTX] = ctx = sidebar.sidebar()
        lesson_mode.writer(name, ctx.kind)          # "save as lesson step", download
        links.apply(name, ctx)                      # a link's first run: its settings, checked against the model
        links.share(name, ctx)                      # the address bar follows the view; "Copy link"
        lesson_mode.question(current, LESSON_PAGES)  # the step's question, above the page
        current.run()
finally:
    warmup.done(early)
    memory.after_run()                    # the page's namespace (its tensors) is garbage now: free it soon
