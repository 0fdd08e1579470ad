"""The tutorials' walk-through in a real browser, both languages: 我是一名工程师。 on the shipped zh-en, every step
of Step-through decoding, the attention page's cross-attention and Compare architectures; a screenshot of each
under test-artifacts/walkthrough/ (look at them)."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from browser_util import ARGS, ARTIFACTS, CHROMIUM
from browser_util import open_drawn as _open
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]

TEXT = "我是一名工程师。"
WAIT_MS = 240_000
def test_the_walkthrough_step_by_step_in_both_languages(server):  # noqa: F811
    from playwright.sync_api import sync_playwright
    from viz_transformer import load_checkpoint
    url, root = server
    if not (root / "zh-en").is_dir():
        pytest.skip("the shipped zh-en did not load: the tiny models cannot translate the walk-through")
    steps = load_checkpoint(root / "zh-en").run(TEXT).trace.steps
    out = ARTIFACTS / "walkthrough"
    out.mkdir(parents=True, exist_ok=True)
    base = f"checkpoint=zh-en&text={quote(TEXT)}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1366, "height": 2600})   # the whole step in one picture
        pg.set_default_timeout(WAIT_MS)
        for lang, table in (("en", EN), ("zh", ZH)):
            reads = table["dc.reads"].split("{heads}")[0]
            for i, step in enumerate(steps, 1):
                shown = _open(pg, f"{url}/decoding?{base}&decode_step={i}&lang={lang}")
                assert reads in shown, (lang, i)                       # which source piece each head reads most
                assert step.piece in shown, (lang, i, step.piece)      # the piece this step chose
                pg.screenshot(path=str(out / f"{lang}-decoding-step{i}.png"), full_page=True)
            _open(pg, f"{url}/attention?{base}&block=decoder.cross_attn&lang={lang}")
            pg.screenshot(path=str(out / f"{lang}-attention-cross.png"), full_page=True)
            shown = _open(pg, f"{url}/architectures?{base}&lang={lang}")
            assert table["ar.title"] in shown
            pg.screenshot(path=str(out / f"{lang}-architectures.png"), full_page=True)
        browser.close()
