"""Where a live class's students go: the address its join link and QR code are built from (VIZ_PUBLIC_URL, else the
teacher's own page) and whether that address is one only the teacher's computer can open. Pure: no streamlit.

    base = public_base("http://127.0.0.1:8501/live_class", {"VIZ_PUBLIC_URL": "http://192.168.1.20:8501"})
    join_link(base, "ABCD2345", "en")   # 'http://192.168.1.20:8501/live_class?class=ABCD2345&lang=en'
"""
from __future__ import annotations

import ipaddress
import os
import re
from typing import Mapping, Optional
from urllib.parse import urlencode, urlsplit

ENV = "VIZ_PUBLIC_URL"        # the app's root as students' phones reach it, e.g. http://192.168.1.20:8500
PAGE = "/live_class"
CLASS, TEACH, ME = "class", "teach", "me"      # query params: a student's class, the teacher's class, a browser id


def public_url(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """VIZ_PUBLIC_URL without its trailing slash, None when unset; ValueError (one line) when it is not an http(s)
    address of a host (a query or fragment has no place in it: the page and its parameters are added to it)."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"{ENV}={raw!r} is not an address such as http://192.168.1.20:8500")
    return raw.rstrip("/")


def app_root(page_url: Optional[str]) -> str:
    """The app's root from the address of its live class page: http://h:8501/base/live_class -> http://h:8501/base."""
    return re.sub(rf"{PAGE}/?$", "", (page_url or "").rstrip("/"))


def is_loopback(url: Optional[str]) -> bool:
    """Whether `url` names this computer only (localhost, 127.x, ::1, 0.0.0.0): no other device can open it."""
    host = (urlsplit(url or "").hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def public_base(page_url: Optional[str], environ: Optional[Mapping[str, str]] = None) -> str:
    """The root students' links are built from: VIZ_PUBLIC_URL when set, else the root of the teacher's page."""
    return public_url(environ) or app_root(page_url)


def needs_warning(page_url: Optional[str], environ: Optional[Mapping[str, str]] = None) -> bool:
    """VIZ_PUBLIC_URL is unset and the teacher's page is on a loopback address: phones cannot open the join link."""
    return not (os.environ if environ is None else environ).get(ENV, "").strip() and is_loopback(page_url)


def link(base: str, path: str, **params) -> str:
    """base + path + the params that are not None, in their order, URL-encoded."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{base.rstrip('/')}{path}" + (f"?{query}" if query else "")


def join_link(base: str, code: str, lang: str) -> str:
    """What students open (and the QR code holds): the class's code and the language, nothing else."""
    return link(base, PAGE, **{CLASS: code, "lang": lang})


def teacher_page(base: str, code: str, lang: str) -> str:
    """The teacher's page of a class: it carries no secret (the right to act is in the teacher's session)."""
    return link(base, PAGE, **{TEACH: code, "lang": lang})
