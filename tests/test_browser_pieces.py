"""Characters outside the vocabulary on the attention page, in a real browser: SentencePiece spells 🍎 and 诊 as
byte pieces (<0xF0> <0x9F> …); every axis shows the character instead (🍎(1/4) … 🍎(4/4)), never the hex."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM
from browser_util import open_drawn as _open

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]

TEXT = "我吃了一个🍎，然后去诊所。"
WAIT_MS = 240_000


def test_byte_pieces_show_as_their_characters_on_the_attention_page(server):  # noqa: F811
    from playwright.sync_api import sync_playwright
    from viz_transformer import load_checkpoint
    url, root = server
    name = "zh-en" if (root / "zh-en").is_dir() else "tiny-zh-en"      # the shipped model, or the tiny one
    hm = load_checkpoint(root / name)
    raw = [hm.tokenizer.sp.id_to_piece(i) for i in hm.tokenizer.encode(TEXT)]
    assert "<0xF0>" in raw                                   # the case under test: 🍎 is spelled in bytes
    out = ARTIFACTS / "pieces"
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1366, "height": 1400})
        pg.set_default_timeout(WAIT_MS)
        _open(pg, f"{url}/attention?checkpoint={name}&text={quote(TEXT)}")
        ticks = " ".join(pg.locator('[data-testid="stPlotlyChart"] .xtick text, '
                                    '[data-testid="stPlotlyChart"] .ytick text').all_text_contents())
        pg.screenshot(path=str(out / "attention-apple.png"), full_page=True)
        browser.close()
    assert "🍎(1/4)" in ticks and "🍎(4/4)" in ticks, ticks
    if "<0xE8>" in raw:                                      # 诊 = E8 AF 8A, spelled in bytes by this vocabulary
        assert "诊(1/3)" in ticks, ticks
    else:
        assert "诊" in ticks, ticks
    assert "<0x" not in ticks, ticks
