"""viz_transformer's explorer: `streamlit run app.py`, then open the printed URL.

This file owns what every page shares (the language, the sidebar: checkpoint, text, the cached run) and
the navigation, grouped by what a student does; each page in views/ reads the shared Context with
views.context.need_run(). Add ?lang=zh to the address for the Chinese interface.
The folder is deliberately not called pages/: a pages/ folder beside the entrypoint switches
Streamlit to its legacy multipage mode until st.navigation first runs, so a deep link opened
first after a restart (and every AppTest rerun) would run the page without this file.
"""
from pathlib import Path

import streamlit as st

from views import language, warmup
from views.strings import t

language.resolve()
ICON = str(Path(__file__).resolve().parent / "views" / "icon.png")      # shipped: a :material: page icon is an SVG
st.set_page_config(page_title=t("app.title"), page_icon=ICON, layout="wide")   # fetched from fonts.gstatic.com
early = warmup.plotly_early()          # a fresh server: the browser loads plotly.js while torch is imported
try:
    from views import context, guard, lesson, memory, sidebar  # noqa: E402  (imports torch)
finally:
    warmup.imported(early)


def page(path: str, key: str, icon: str, **kw) -> st.Page:
    return st.Page(path, title=t(key), icon=f":material/{icon}:", **kw)


SECTIONS = {
    t("nav.sec.look"): [page("views/overview.py", "nav.overview", "info", default=True),
                        page("views/attention.py", "nav.attention", "grid_view"),
                        page("views/masks.py", "nav.masks", "visibility_off"),
                        page("views/positional.py", "nav.positional", "waves")],
    t("nav.sec.step"): [page("views/step_by_step.py", "nav.steps", "calculate"),
                        page("views/decoding.py", "nav.decoding", "skip_next"),
                        page("views/lens.py", "nav.lens", "layers")],
    t("nav.sec.experiment"): [page("views/knockout.py", "nav.knockout", "block"),
                              page("views/positions.py", "nav.positions", "swap_horiz"),
                              page("views/compare.py", "nav.compare", "compare"),
                              page("views/patching.py", "nav.patching", "healing"),
                              page("views/architectures.py", "nav.architectures", "account_tree"),
                              page("views/rollout.py", "nav.rollout", "stacked_line_chart"),
                              page("views/head_stats.py", "nav.stats", "analytics")],
    t("nav.sec.train"): [page("views/training.py", "nav.training", "movie"),
                         page("views/export.py", "nav.export", "download")],
}
PAGES = [p for group in SECTIONS.values() for p in group]
LESSON_PAGES = {p.url_path or "overview": p for p in PAGES}     # a lesson step's page name (lessons.PAGES) -> page

current = st.navigation(SECTIONS, expanded=True)      # every page listed, none behind "View more"
language.switch()
guard.clean_text()
lesson.before_sidebar(current, LESSON_PAGES)          # ?lesson=NAME: apply its step, show its note
try:
    with guard.healing(current.title):
        st.session_state[context.CTX] = ctx = sidebar.sidebar()
        lesson.writer(current.url_path or "overview", ctx.kind)          # "save as lesson step", download
        current.run()
finally:
    warmup.done(early)
    memory.after_run()                    # the page's namespace (its tensors) is garbage now: free it soon
