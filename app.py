"""viz_transformer's explorer: `streamlit run app.py`, then open the printed URL.

This file owns what every page shares (the language, the sidebar: checkpoint, text, the cached run) and
the navigation, grouped by what a student does (the pages are listed in viz_explorer/kit/registry.py); each page in
viz_explorer/pages/ reads the shared Context with viz_explorer.kit.context.need_run(). Add ?lang=zh to the address for the
Chinese interface. Every page keeps its view in the address (viz_explorer/lessons/links.py): a copied link opens
the same view. The pages live in viz_explorer/pages/, not in a pages/ folder beside this file: that switches
Streamlit to its legacy multipage mode until st.navigation first runs, so a deep link opened
first after a restart (and every AppTest rerun) would run the page without this file.

`streamlit run app.py` finds `app` below, an st.App, and serves this file's page run (`__name__ == "__main__"`
in Streamlit's run) with it: its lifespan starts the one start-up load (torch, the app's modules and the default
model: viz_explorer/startup/load.py) with the process, so the model loads while the browser loads Streamlit.
"""
from pathlib import Path

import streamlit as st

from viz_explorer.server import threads
from viz_explorer.startup import load
from viz_explorer.classroom import class_routes
from viz_explorer.kit import language, presenter, registry, screen
from viz_transformer.plots import figure_rules
from viz_explorer.kit.strings import t

threads.apply()                  # before anything imports torch: its intra-op threads (viz_explorer/server/threads.py)
app = st.App(Path(__file__).resolve(), lifespan=load.lifespan,       # `streamlit run app.py` serves this
             routes=class_routes.routes())
ICON = str(Path(__file__).resolve().parent / "viz_explorer" / "icon.png")   # shipped: a :material: page icon is an SVG


def page(spec: registry.PageSpec) -> st.Page:
    return st.Page(registry.page_path(spec), title=t(spec.title), icon=f":material/{spec.icon}:",
                   url_path="" if spec.name == registry.DEFAULT else spec.name, default=spec.name == registry.DEFAULT)


def main() -> None:
    """One page run: the language, the page config, the navigation, the loading note while the start-up load
    works, the sidebar, then the page."""
    language.resolve()
    presenter.resolve()                                                      # ?present=1: a projected class
    st.set_page_config(page_title=t("app.title"), page_icon=ICON, layout="wide",    # fetched from fonts.gstatic.com
                       initial_sidebar_state=presenter.sidebar_state())
    presenter.style()
    sections = {t(group): [page(spec) for spec in specs] for group, specs in registry.SECTIONS.items()}
    lesson_pages = {spec.name: p for spec, p in zip(registry.PAGES, (p for g in sections.values() for p in g))}
    current = st.navigation(sections, expanded=True)      # every page listed, none behind "View more"
    language.switch()
    if not load.ready():             # a fresh server: the start-up load is at work (viz_explorer/startup/load.py)
        note, chart = st.empty(), st.sidebar.empty()
        note.caption(t("warmup.loading"))                   # what a student reads meanwhile: no error, no blank page
        with chart.container():     # the browser loads plotly.js meanwhile; in the sidebar, since the block holding
            load.blank_chart()      # a chart paints only once plotly.js is loaded, and the note should not wait
        load.wait()                                         # (under AppTest: starts it)
        note.empty()
        chart.empty()
    from viz_explorer.server import cache_sizes, memory          # these import torch: loaded by now, by the start-up load
    from viz_explorer.kit import context, session_guard, sidebar
    from viz_explorer.lessons import lesson_mode, links
    from viz_explorer.classroom import live_class
    session_guard.clean_text()
    live_class.remember()                                      # ?class=CODE&me=ID: this session is that student
    lesson_mode.before_sidebar(current, lesson_pages)          # ?lesson=NAME: apply its step, show its note
    live_class.follow_lesson()                                 # a teacher's lesson moves their class
    name = current.url_path or registry.DEFAULT
    links.open_link(name, sidebar.checkpoint_names)            # a link's first run: its checkpoint and text
    presenter.page_steps(current, lesson_pages)                # ?present=1 without a lesson: ← / → go through the pages
    with memory.page_run():          # the page's namespace (its tensors) is garbage once it ends: freed soon after
        try:
            with session_guard.healing(registry.spec(name)):
                st.session_state[context.CTX] = ctx = sidebar.sidebar()
                lesson_mode.writer(name, ctx.kind)          # "save as lesson step", download
                links.apply(name, ctx)                      # a link's first run: its settings, checked against the model
                links.share(name, ctx)                      # the address bar follows the view; "Copy link"
                lesson_mode.question(current, lesson_pages)  # the step's question, above the page
                with figure_rules.screen(screen.figure_px()):   # a phone's figures laid out for its narrow column
                    current.run()
        finally:
            held = st.session_state.get(context.CTX)
            if held is not None:
                held.let_go()                     # the session keeps no run beside the memo's budget
            cache_sizes.write_if_asked()          # VIZ_STATS_FILE: what the server holds, for a soak benchmark


if __name__ == "__main__":         # Streamlit runs this file as __main__ for each visitor
    main()
