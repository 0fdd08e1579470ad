"""Offline: a page load and a visit to every page ask nothing of any host but the app's own server (the page
icon once came from fonts.gstatic.com, which fails offline and from mainland China). The real server in
Debian's chromium; every request the page makes is recorded."""
from __future__ import annotations

from urllib.parse import urlparse

import pytest

from browser_util import ARGS, CHROMIUM, TIMEOUT_MS, settle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


def test_no_request_leaves_the_server(server):  # noqa: F811
    from playwright.sync_api import sync_playwright
    url, _ = server
    seen: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_default_timeout(TIMEOUT_MS)
        pg.on("request", lambda r: seen.append(r.url))
        for lang in ("en", "zh"):
            pg.goto(f"{url}/?lang={lang}")
            pg.locator('[data-testid="stSidebarNav"] a').first.wait_for()
            settle(pg)
            for href in pg.eval_on_selector_all('[data-testid="stSidebarNav"] a', "els => els.map(a => a.href)"):
                pg.locator(f'[data-testid="stSidebarNav"] a[href="{href}"]').click()
                settle(pg)
        icon = pg.eval_on_selector('link[rel~="icon"]', "l => l.href")
        browser.close()
    fetched = [u for u in seen if not u.startswith(("data:", "blob:"))]
    remote = sorted({u for u in fetched if urlparse(u).hostname != "127.0.0.1"})
    assert not remote, remote
    assert urlparse(icon).hostname == "127.0.0.1", icon                       # the shipped viz_explorer/icon.png
    assert any("MaterialSymbols" in u for u in fetched)          # the navigation's icons: Streamlit's own font
