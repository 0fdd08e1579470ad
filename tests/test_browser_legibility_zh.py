"""Every chart legible, Chinese interface: tests/test_browser_legibility.py's walk (its docstring says what is
measured) with ?lang=zh, in a file of its own so that pytest.ini's two workers walk the two languages at once.
On the pages the walk opens it also checks the Chinese interface (Debian's chromium with fonts-noto-cjk): each
page's Chinese title, the Chinese sidebar, the address keeps lang=zh, the Overview's diagram has Chinese block
names and its link opens the positional-encoding page; a screenshot of each page goes under test-artifacts/zh/
(look at them); and no request leaves the app's own server (browser_util.Offline)."""
from __future__ import annotations

import os
import shlex

import pytest

from benchmarks import legibility
from browser_util import ARTIFACTS, Offline, legible, settle
from viz_explorer.kit.strings_zh import ZH

pytestmark = pytest.mark.browser

TITLES = {"overview": "ov", "attention": "at", "masks": "mk", "positional": "pe", "step_by_step": "st",  # page -> its
          "decoding": "dc", "knockout": "ko", "positions": "po", "compare": "cp", "architectures": "ar",   # title's key
          "rollout": "ro", "head_stats": "hs", "training": "tr", "export": "ex"}
SECTIONS = ("nav.sec.look", "nav.sec.step", "nav.sec.experiment", "nav.sec.train", "sidebar.text")


class Chinese(Offline):
    """The walk's check: on each page's first visit (the first checkpoint, the short text), the Chinese interface."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __call__(self, walker, name: str, where: dict) -> None:
        super().__call__(walker, name, where)
        if name in self.seen:
            return
        self.seen.append(name)
        pg = walker.pg
        if name in TITLES:
            assert pg.get_by_role("heading", name=ZH[f"{TITLES[name]}.title"]).count(), name
        assert pg.locator('[data-testid="stException"]').count() == 0, name
        sidebar = pg.locator('[data-testid="stSidebar"]').inner_text()
        assert all(ZH[s] in sidebar for s in SECTIONS), (name, sidebar)
        assert "lang=zh" in pg.url, pg.url                   # the address stays a shareable Chinese link
        out = ARTIFACTS / "zh"
        out.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(out / f"{len(self.seen) - 1:02d}-{name}.png"), full_page=True)
        if name == "overview":                               # the diagram is drawn with Chinese block names
            drawn = "".join(pg.locator('[data-testid="stPlotlyChart"]').first.text_content().split())
            assert all("".join(ZH[k].split()) in drawn for k in ("dg.tok_embed", "dg.softmax"))  # a label may wrap
            # the diagram's link opens the positional-encoding page, still in Chinese (a page link: the session,
            # its text and checkpoint, stays; the walk goes on from there)
            pg.get_by_text(ZH["ov.link"].format(block=ZH["dg.short.pos"], page=ZH["nav.positional"])).click()
            pg.get_by_role("heading", name=ZH["pe.title"]).first.wait_for()
            settle(pg)
            assert pg.locator('[data-testid="stException"]').count() == 0
            assert "lang=zh" in pg.url, pg.url
            walker.here = "positional"


@pytest.mark.walk
def test_every_chart_is_legible_in_chinese(server):
    _walk(server, ())


def test_every_page_once_is_legible_in_chinese(server):
    """The walk's Chinese checks and measurement on every page and tab once: the default run's share of the walk."""
    _walk(server, ("--checkpoint", "zh-en", "--lengths", "30"))


def _walk(server, narrow: tuple[str, ...]) -> None:
    chinese = Chinese()
    legible("zh", server, chinese, narrow=narrow)
    chinese.verify()
    asked = legibility.options(shlex.split(os.environ.get("LEGIBILITY_ARGS", ""))).pages or TITLES
    assert set(TITLES) & set(asked) <= set(chinese.seen), f"pages not walked: {set(TITLES) & set(asked) - set(chinese.seen)}"
