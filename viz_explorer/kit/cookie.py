"""A value kept in this browser (a cookie, SameSite=Strict, secure over https): Streamlit reads cookies
(st.context.cookies) but cannot set one, so a script in the page writes it."""
from __future__ import annotations

import re

import streamlit as st

SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")      # names and values a script may carry (token_urlsafe, codes)


def write(name: str, value: str, seconds: int) -> bool:
    """Write cookie `name` = `value` for `seconds` with a script in the page (an element of no height); False,
    writing nothing, when either is not SAFE or the browser already holds it."""
    if not (SAFE.match(name) and SAFE.match(value)) or st.context.cookies.get(name) == value:
        return False
    secure = "+(location.protocol==='https:'?';secure':'')"
    st.html(f"<script>document.cookie='{name}={value};path=/;max-age={int(seconds)};samesite=strict'{secure};"
            "</script>", unsafe_allow_javascript=True)
    return True
