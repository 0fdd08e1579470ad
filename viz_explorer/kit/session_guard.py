"""Session state the browser never sends but a script, a test or a stale session can hold: the text
is made safe before the sidebar reads it, and a page that fails on the state it was handed is run
again once with its own settings back at their defaults (logged server-side, a note for the user).
Everything else the session holds survives: the text, the checkpoint, the language, a class (the teacher's
right, a student's id), the open lesson, the links made, the other pages' settings."""
from __future__ import annotations

import logging
from contextlib import contextmanager

import streamlit as st

from viz_explorer.kit.strings import t

log = logging.getLogger("viz_transformer.app")
HEALED = "_guard_healed"


def clean_text(key: str = "text") -> None:
    """The shared text must be a str Streamlit can send (lone surrogates cannot be encoded as UTF-8)."""
    if key not in st.session_state:
        return
    v = st.session_state[key]
    if not isinstance(v, str):
        del st.session_state[key]                 # the sidebar puts its default back
    elif any("\ud800" <= c <= "\udfff" for c in v):
        st.session_state[key] = v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def own_keys(keys, prefixes: tuple[str, ...]) -> list[str]:
    """The session keys a page owns (viz_explorer/kit/registry.py's PageSpec.keys: their prefixes)."""
    return [k for k in keys if isinstance(k, str) and prefixes and k.startswith(prefixes)]


@contextmanager
def healing(page):
    """Run the sidebar and `page` (a registry.PageSpec); on an exception, log it with its context, reset the
    page's own settings and rerun once. A second failure in a row is raised."""
    try:
        yield
    except Exception:
        state = st.session_state
        text = state.get("text")
        log.exception("page %s failed (checkpoint %r, text of %s characters, healed before: %s)", page.name,
                      state.get("ckpt"), len(text) if isinstance(text, str) else type(text).__name__,
                      bool(state.get(HEALED)))
        if state.get(HEALED):
            state[HEALED] = False
            raise
        for key in own_keys(list(state.keys()), page.keys):
            del state[key]
        state[HEALED] = True
        st.rerun()
    else:
        if st.session_state.get(HEALED):
            st.session_state[HEALED] = False
            st.toast(t("guard.reset"), icon=":material/restart_alt:")
