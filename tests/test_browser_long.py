"""In Chromium against the real server: a text of 2,048 pieces on a small random Qwen2-style folder (tiny
dimensions, a context of 4,096), every page opened from its address with that text: each is drawn with no
exception shown (every page works on a long text; the heatmaps show a window of it)."""
from __future__ import annotations

import dataclasses
import os
from urllib.parse import quote

import pytest

import hf_util as H
from browser_util import ARGS, ARTIFACTS, CHROMIUM, app_server, open_drawn
from viz_explorer.kit import registry

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")]
NAME = "qwen2-long"
PIECES = 2048
LONG_MS = 600_000            # a page over 2,048 pieces on a busy 2-core machine


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("long-browser")
    shape = H.SHAPE_BY_ID["qwen2-gqa2-tied-sharded"]
    shape = dataclasses.replace(shape, id=NAME, shard=None,
                                config={**shape.config, "max_position_embeddings": 2 * PIECES})
    H.build(shape, root / NAME)
    with app_server(root, "server-long.log") as url:
        yield url, root


@pytest.mark.walk
def test_every_page_at_2048_pieces(long_server):
    _open_pages(long_server, [spec for spec in registry.PAGES])


def test_the_attention_page_at_2048_pieces(long_server):
    """The walk's share in the default run: the page students open first after the Overview."""
    _open_pages(long_server, [spec for spec in registry.PAGES if spec.name == "attention"])


def _open_pages(long_server, specs) -> None:
    from playwright.sync_api import sync_playwright
    from benchmarks.texts import text_of
    from viz_transformer import load_checkpoint
    url, root = long_server
    hm = load_checkpoint(root / NAME)
    text = text_of(hm.tokenizer, PIECES + 1, seed=1, lang="en")
    assert len(hm.tokenizer.encode(text)) == PIECES
    assert specs
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1440, "height": 1800})
        pg.set_default_timeout(LONG_MS)
        for spec in specs:
            path = "" if spec.name == registry.DEFAULT else spec.name
            shown = open_drawn(pg, f"{url}/{path}?checkpoint={NAME}&text={quote(text)}")
            assert "Traceback" not in shown, spec.name
            pg.screenshot(path=str(ARTIFACTS / f"long-{spec.name}.png"))
        browser.close()
