"""A fresh server's first visitor (viz_explorer/startup/preview.py): the Overview's model-free part at once (the diagram,
with the encoder length SentencePiece gives and the decoder at its first step) and a loading note, no error;
then, with no click, the full Overview with the model's own translation. Both entries: serve.py (st.App's
lifespan starts the loading) and app.py (the first visit does); in English and in Chinese."""
from __future__ import annotations

from pathlib import Path

import pytest

from test_browser import ARGS, ARTIFACTS, CHROMIUM, NO_PREVIEW, TIMEOUT_MS, _usable

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "checkpoints"
from stclient import Server

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
SPINNER = "[data-testid=\"stExpanderIconSpinner\"]"
DIAGRAM = "document.querySelector('[data-testid=\"stPlotlyChart\"] .main-svg .annotation')"
OUTPUT = ("() => [...document.querySelectorAll('[data-testid=\"stCode\"]')].map(c => c.innerText.trim())"
          ".filter(x => x)")


def _expected(text: str) -> tuple[int, str]:
    """The default text's encoder length from SentencePiece itself (+ [end]) and the model's greedy output."""
    import sentencepiece as spm
    from viz_transformer import load_checkpoint
    sp = spm.SentencePieceProcessor(model_file=str(REAL / "zh-en" / "tokenizer.model"))
    return len(sp.encode(text)) + 1, load_checkpoint(REAL / "zh-en").run(text).output


@pytest.mark.parametrize("entry, lang", [("serve.py", "en"), ("app.py", "zh")])
def test_a_fresh_server_previews_the_overview_then_completes_it(tmp_path, entry, lang):
    if not _usable(REAL / "zh-en"):
        pytest.skip("the shipped zh-en checkpoint is missing")
    from playwright.sync_api import sync_playwright
    from viz_explorer.server import defaults
    text = defaults.EXAMPLES["translator"][0]
    src_len, output = _expected(text)
    ARTIFACTS.mkdir(exist_ok=True)
    with Server(ROOT, REAL, log=tmp_path / "server.log", entry=entry) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_default_timeout(TIMEOUT_MS)
        pg.goto(f"{server.url}/?lang={lang}")
        # the preview, read in one go: its loading status, the diagram drawn, the script over, no model output
        # and no pieces tables yet (the full page has both)
        shapes = pg.wait_for_function(
            f"() => document.querySelector('{SPINNER}') && {DIAGRAM} && document.querySelector("
            "'[data-test-script-state]').getAttribute('data-test-script-state') === 'notRunning' && "
            f"({OUTPUT})().length === 0 && !document.querySelector('[data-testid=\"stDataFrame\"]') && "
            "[...document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .annotation')].map(a => a.textContent)"
        ).json_value()
        pg.screenshot(path=str(ARTIFACTS / f"preview-{lang}.png"))        # the preview lasts about 1-2 s
        assert f"[{src_len} × 256]" in shapes and "[1 × 256]" in shapes, shapes     # the decoder: [begin] only
        assert pg.locator('[data-testid="stException"]').count() == 0
        # then the full Overview, by itself: the model's translation and the pieces tables
        pg.wait_for_function(f"() => {NO_PREVIEW} && ({OUTPUT})().length > 0 && "
                             "document.querySelectorAll('[data-testid=\"stDataFrame\"]').length >= 2")
        assert pg.evaluate(OUTPUT) == [output]
        shapes = pg.evaluate("() => [...document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .annotation')]"
                             ".map(a => a.textContent)")
        assert f"[{src_len} × 256]" in shapes and "[1 × 256]" not in shapes, shapes   # the decoder's full length
        assert pg.locator('[data-testid="stException"]').count() == 0
        pg.wait_for_timeout(500)
        pg.screenshot(path=str(ARTIFACTS / f"preview-{lang}-complete.png"))
        browser.close()
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert "Traceback" not in log
    # the model loaded only once the browser had drawn the preview (its second poll), not beside plotly.js
    assert "heavy part starts after the preview drawn" in log, log[-3000:]
