"""Presenter mode (`?present=1`): the app as a teacher projects it: large type, the sidebar collapsed, one
figure to a screen, and ← / → to step through the lesson (or, with no lesson open, through the pages).

Large type: the page's root font size goes from 16 to FONT_PX pixels; Streamlit sizes all its type in rem.
One figure to a screen: the page scrolls element by element (CSS scroll snapping: a wheel turn or PageDown
brings the next paragraph or figure to just under the header, so a figure is seen whole, top first; proximity
snapping to the figures alone did not engage in Chromium). Figures are not stretched by CSS (a CSS zoom broke
Plotly's own sizing, and a chart box a screen high made Plotly spread a heatmap of square cells over it with
most of it off screen): `figure` draws each one larger on the server, its cells, fonts and margins alike
(plots.style.zoomed), as far as it fits a projector's screen (figure_rules.zoom), and figures that would stand
side by side stand one under another.
The mode is kept in st.session_state["present"] and written back to the address on every run, so it
survives navigating (as ?lang= does); ?present=0 ends it.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import streamlit as st

from viz_explorer.server.class_address import TEACH
from viz_explorer.kit.strings import t
from viz_transformer.plots import figure_rules
from viz_transformer.plots.style import zoomed

KEY = "present"                    # st.session_state[KEY]: True while presenting
FONT_PX = 24                       # the page's root font size (Streamlit's is 16): all its type is in rem
SCREEN_PX = (1920, 1080)           # the projector figures are drawn for (a smaller screen caps them to its column)
# Where a figure may go on it: the main column (wide layout, sidebar collapsed: 5rem of padding each side) and
# the screen under the header (3.75rem), less the figure's download button under it (2.5rem).
AREA_PX = (SCREEN_PX[0] - 2 * 5 * FONT_PX, SCREEN_PX[1] - (3.75 + 2.5) * FONT_PX)
_AREA: ContextVar[tuple[float, float]] = ContextVar("presenter_area", default=AREA_PX)   # within(): a smaller one
# A fixed string, no user content. The header bar is 3.75rem: what is scrolled to starts just under it.
STYLE = f"""<style>
html {{ font-size: {FONT_PX}px !important; }}
[data-testid="stMain"] {{ scroll-snap-type: y mandatory; }}
[data-testid="stMainBlockContainer"] [data-testid="stElementContainer"] {{ scroll-snap-align: start;
  scroll-margin-top: 3.75rem; }}
</style>"""


def resolve() -> bool:
    """Call in app.py before st.set_page_config: ?present=1 turns presenter mode on, ?present=0 off;
    the address then says whether it is on. Returns whether it is."""
    asked = st.query_params.get(KEY)
    if asked in ("0", "1"):
        st.session_state[KEY] = asked == "1"
    if active():
        st.query_params[KEY] = "1"
    elif KEY in st.query_params:
        del st.query_params[KEY]
    return active()


def active() -> bool:
    return st.session_state.get(KEY) is True


def figure(fig):
    """A figure as presenter mode draws it: zoomed to fill a projector's screen (nothing outside the mode)."""
    if not active():
        return fig
    return zoomed(fig, figure_rules.zoom(fig.layout.width, fig.layout.height or 450, *_AREA.get()))


@contextmanager
def within(width: float, height: float):
    """Figures drawn inside are zoomed to fit width x height px (a column of a screen shared with other things)."""
    token = _AREA.set((width, height))
    try:
        yield
    finally:
        _AREA.reset(token)


def sidebar_state() -> str:
    """set_page_config's initial_sidebar_state."""
    return "collapsed" if active() else "auto"


# Always, a fixed string: a display formula wider than the screen (the attention formula on a 390 px phone) is
# shrunk a little on a narrow screen and scrolls sideways past that, instead of being cut off at the edge.
FORMULA_STYLE = """<style>
.katex-display { overflow-x: auto; overflow-y: hidden; }
@media (max-width: 640px) { .katex-display { font-size: 0.85em; } }
</style>"""

# Always, a fixed string: the sidebar shows what to type and which model first (its box of inputs, key sb_inputs in
# viz_explorer/kit/sidebar.py, and the language switch), then the page list, then the rest (writing a lesson, the
# link): Streamlit puts its page list above everything a script writes there, and 18 pages pushed the text box
# below a laptop's first screen. The sidebar's own wrappers step aside (display: contents), so the script's
# elements and the page list are items of one column that `order` arranges; the page list stays where it is in the
# page (its links, tests and keyboard order unchanged).
SIDEBAR_STYLE = """<style>
[data-testid="stSidebarContent"] { display: flex; flex-direction: column; gap: 1rem; padding-bottom: 6rem; }
[data-testid="stSidebarContent"] > * { flex-shrink: 0; }
[data-testid="stSidebarUserContent"], [data-testid="stSidebarUserContent"] > div,
[data-testid="stSidebarUserContent"] > div > [data-testid="stVerticalBlock"] { display: contents; }
[data-testid="stSidebarHeader"] { order: -3; margin-bottom: 0; }
[data-testid="stSidebarNav"] { border-top: 1px solid color-mix(in srgb, currentColor 20%, transparent); padding-top: 1rem; }
[data-testid="stSidebarContent"] .st-key-lang { order: -2; }
[data-testid="stSidebarContent"] :has(> .st-key-sb_inputs), [data-testid="stSidebarContent"] .st-key-sb_inputs {
  order: -1; }
</style>"""

# Always, a fixed string: a touch screen (a phone) shows a table's toolbar (Streamlit's search, download, full
# screen) all the time, laid over the 2.75rem above the table, where it covered the line under the table's
# heading; there a table keeps that room free above it.
TOUCH_STYLE = """<style>
@media (hover: none) {
  [data-testid="stMain"] [data-testid="stElementContainer"]:has([data-testid="stDataFrame"]) { margin-top: 2rem; }
}
</style>"""


def style() -> None:
    """The app's CSS: the sidebar's order, formulas that fit a phone, a touch screen's tables; in presenter mode,
    the projector's too."""
    st.html(SIDEBAR_STYLE + FORMULA_STYLE + TOUCH_STYLE + (STYLE if active() else ""))


def step_buttons(where, back, forward) -> None:
    """The ← / → buttons in `where`: back and forward are (label, on_click, args, disabled)."""
    row = where.container(horizontal=True, key="pr_steps")
    for (label, on_click, args, disabled), key, shortcut, icon in (
            (back, "pr_back", "Left", ":material/chevron_left:"), (forward, "pr_next", "Right", ":material/chevron_right:")):
        row.button(label, key=key, on_click=on_click, args=args, disabled=disabled, shortcut=shortcut, icon=icon,
                   icon_position="right" if key == "pr_next" else "left", type="primary" if key == "pr_next" else "secondary")


def lesson_box():
    """Where the lesson's panel goes while presenting: the top of the page (the sidebar is out of sight)."""
    return st.container(border=True, key="lesson_panel")


def _go_page(name: str) -> None:
    st.session_state["_pr_goto"] = name


def page_steps(current, pages: dict) -> None:
    """With no lesson open: ← / → open the previous / next page of the navigation. pages: name -> st.Page."""
    if not active() or st.session_state.get("lesson") is not None or st.query_params.get(TEACH):
        return                         # a lesson's, or a presented class's own ← / → (viz_explorer/classroom/class_present.py)
    goto = st.session_state.pop("_pr_goto", None)
    if goto in pages and pages[goto].title != current.title:
        st.switch_page(pages[goto])
    names = list(pages)
    i = next((k for k, n in enumerate(names) if pages[n].title == current.title), 0)
    back = (t("pr.back_page"), _go_page, (names[max(i - 1, 0)],), i == 0)
    forward = (t("pr.next_page"), _go_page, (names[min(i + 1, len(names) - 1)],), i == len(names) - 1)
    step_buttons(st, back, forward)
