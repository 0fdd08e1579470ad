"""A fresh server started with the README's command, `streamlit run app.py`, and its first visitor in Chromium:
the page is drawn (the script over, no skeleton, every chart drawn), with the model's own output and no error;
the loading note and the blank chart of the start-up (viz_explorer/startup/load.py) are gone. In English and
in Chinese."""
from __future__ import annotations

from pathlib import Path

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM, READY, TIMEOUT_MS, usable
from stclient import Server

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "checkpoints"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
OUTPUT = ("() => [...document.querySelectorAll('[class*=\"st-key-output_\"]')].map(c => c.innerText.trim())"
          ".filter(x => x)")
HEIGHTS = ("() => [...document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg')]"
           ".map(s => s.getBoundingClientRect().height)")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_fresh_server_draws_the_overview_with_the_models_output(tmp_path, lang):
    if not usable(REAL / "zh-en"):
        pytest.skip("the shipped zh-en checkpoint is missing")
    from playwright.sync_api import sync_playwright
    from viz_explorer.server import defaults
    from viz_transformer import load_checkpoint
    output = load_checkpoint(REAL / "zh-en").run(defaults.EXAMPLES["translator"][0]).output
    ARTIFACTS.mkdir(exist_ok=True)
    with Server(ROOT, REAL, log=tmp_path / "server.log", entry="app.py") as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.set_default_timeout(TIMEOUT_MS)
        pg.goto(f"{server.url}/?lang={lang}")
        pg.wait_for_function(f"() => ({READY})() && ({OUTPUT})().length > 0")
        assert pg.evaluate(OUTPUT) == [output]
        assert pg.locator('[data-testid="stException"]').count() == 0
        heights = pg.evaluate(HEIGHTS)
        assert heights and min(heights) > 100, heights           # real figures only: the blank chart is gone
        pg.screenshot(path=str(ARTIFACTS / f"start-{lang}.png"))
        browser.close()
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert "ready in" in log and "Traceback" not in log
