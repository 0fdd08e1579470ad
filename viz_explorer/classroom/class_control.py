"""The teacher's right to act on a live class: held in the teacher's browser session (st.session_state) and in a
cookie of that browser, never in an address, so nothing projected, photographed or shared carries it.

- "Start a class" grants it to the session that started the class and writes the cookie (`viz_teach_CODE`,
  SameSite=Strict, 12 h): a reload or a new tab of the same browser (the lesson tab) keeps it.
- Another browser or device takes it back with the teacher key (the class's secret), typed into the teacher's page;
  the key is shown only on demand, folded away, never in a link.
"""
from __future__ import annotations

from typing import Optional

import streamlit as st

from viz_explorer.classroom import store as cr
from viz_explorer.kit import cookie
from viz_explorer.kit.strings import t

SESSION = "lc_teach"               # session_state: (class code, its secret) of the class this session teaches
COOKIE = "viz_teach_{code}"        # the same browser's other tabs and reloads
KEY_SHOWN = "lc_key_shown"         # session_state: the teacher asked to see the key
COOKIE_S = 12 * 3600               # a cookie outlives a lesson, not a week
WRITTEN = "lc_cookie_written"      # session_state: the class codes whose cookie this session has written


def grant(code: str, secret: str) -> None:
    """This session teaches `code` (after Start, or a key typed in); its cookie is written on the next page."""
    st.session_state[SESSION] = (code, secret)


def granted(code: str) -> Optional[str]:
    """The secret of `code` if this session may act as its teacher (from its session, else from its browser's
    cookie, which then fills the session); None otherwise."""
    held = st.session_state.get(SESSION)
    if isinstance(held, tuple) and len(held) == 2 and held[0] == code and cr.is_teacher(code, held[1]):
        return held[1]
    kept = st.context.cookies.get(COOKIE.format(code=code))
    if isinstance(kept, str) and cr.is_teacher(code, kept):
        grant(code, kept)
        return kept
    return None


def keep_in_browser(code: str, secret: str) -> None:
    """Write the cookie once per session."""
    written = st.session_state.setdefault(WRITTEN, [])
    if code not in written and cookie.write(COOKIE.format(code=code), secret, COOKIE_S):
        written.append(code)


def key_form(code: str) -> None:
    """The teacher's page in a browser without the right: type the teacher key to take the class back."""
    st.info(t("lc.key_needed", code=code), icon=":material/lock:")
    typed = st.text_input(t("lc.key"), key="lc_key", type="password", max_chars=64)
    if st.button(t("lc.key_go"), key="lc_key_go", icon=":material/key:"):
        if isinstance(typed, str) and cr.is_teacher(code, typed.strip()):
            grant(code, typed.strip())
            st.rerun()
        st.error(t("lc.key_wrong"))


def show_key(secret: str) -> None:
    """The teacher key, folded away and drawn only when asked (a projected page shows the fold, not the key). The
    choice is a plain session value set by two buttons, not a toggle: the live chart's fragment reruns every second,
    and a widget outside it can lose its value to such a rerun (the key hid itself again); and a second click on a
    Hide the page still shows after the server has hidden the key (a slow room network) must not show it again."""
    shown = bool(st.session_state.get(KEY_SHOWN))
    with st.expander(t("lc.key_title"), icon=":material/key:"):
        st.caption(t("lc.key_help"))
        if shown:
            st.button(t("lc.key_hide"), key="lc_key_hide", on_click=_show_key, args=(False,))
            st.code(secret, language=None)
        else:
            st.button(t("lc.key_show"), key="lc_key_show", on_click=_show_key, args=(True,))


def _show_key(shown: bool) -> None:
    st.session_state[KEY_SHOWN] = shown
