"""No script injection, in a real browser: the `<script>` and `<img onerror>` strings are typed into the
sidebar and into every text box of every page (the pages are read from the navigation, so new ones
are covered); no injected script may run (a `window` flag stays unset), no element with an injected
handler may exist, the text box shows the text literally, and every download (e.g. an HTML report)
holds it escaped."""
from __future__ import annotations

import html

import pytest

from hostile import INJECT
from browser_util import ARTIFACTS, CHROMIUM, TIMEOUT_MS, settle

TEXT = INJECT["script"] + " 我是学生。 " + INJECT["img"]
FLAGS = "() => [window.__pwned_script, window.__pwned_img, window.__pwned_dialog]"
INJECTED = ("() => document.querySelectorAll('[onerror], img[src=\"x\"]').length"
            " + [...document.scripts].filter(s => s.text.includes('__pwned')).length")

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


def assert_nothing_ran(pg, where: str) -> None:
    assert pg.evaluate(FLAGS) == [None, None, None], where
    assert pg.evaluate(INJECTED) == 0, where
    assert pg.locator('[data-testid="stException"]').count() == 0, where


def check_downloads(pg, where: str) -> int:
    n = 0
    for button in pg.locator('[data-testid="stDownloadButton"] button').all():
        if not button.is_visible():                    # inside a closed expander
            continue
        with pg.expect_download() as dl:
            button.click()
        body = open(dl.value.path(), encoding="utf-8", errors="replace").read()
        if dl.value.suggested_filename.lower().endswith((".html", ".htm", ".svg")) or body.lstrip().startswith("<"):
            for raw in INJECT.values():
                assert raw not in body, (where, dl.value.suggested_filename)
            if "report" in dl.value.suggested_filename:        # the report holds the text: escaped, as text
                assert html.escape(INJECT["script"], quote=False) in body or "\\u003cscript" in body, where
        n += 1
    return n


def test_injected_markup_never_runs_on_any_page(server):  # noqa: F811
    from playwright.sync_api import sync_playwright
    url, root = server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu",
                                                                   "--disable-background-networking"])
        ctx = browser.new_context(viewport={"width": 1440, "height": 2000}, accept_downloads=True)
        pg = ctx.new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        pg.on("dialog", lambda d: (pg.evaluate("() => { window.__pwned_dialog = 1 }"), d.dismiss()))
        pg.goto(url)
        settle(pg)
        if root.name != "checkpoints":
            pg.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
            pg.get_by_role("option", name="tiny-zh-en").click()
            settle(pg)
        box = pg.locator('[data-testid="stSidebar"] textarea')
        box.fill(TEXT)
        box.press("Control+Enter")
        settle(pg)
        assert box.input_value() == TEXT                                  # shown literally
        titles = [a.inner_text().strip() for a in pg.locator('[data-testid="stSidebarNav"] a').all()]
        assert len(titles) >= 9, titles
        downloads = 0
        for i, title in enumerate(titles):
            pg.locator('[data-testid="stSidebarNav"] a').nth(i).click()
            settle(pg)
            for field in pg.locator('[data-testid="stMain"] [data-testid="stTextArea"] textarea, '
                                     '[data-testid="stMain"] [data-testid="stTextInput"] input').all():
                if not field.is_visible() or not field.is_enabled():     # a closed expander, gone, or read-only
                    continue
                field.fill(TEXT)
                field.press("Control+Enter" if field.evaluate("e => e.tagName") == "TEXTAREA" else "Enter")
                settle(pg)
            assert_nothing_ran(pg, title)
            downloads += check_downloads(pg, title)
            pg.screenshot(path=str(ARTIFACTS / f"inject-{i}.png"))
        assert_nothing_ran(pg, "the end")
        (ARTIFACTS / "inject-downloads.txt").write_text(f"{downloads} downloads checked\n")
        browser.close()
