"""End-to-end in Chromium with the shipped translators: the architecture comparison draws the three
models' translations and figures, and training playback steps and plays through the snapshots."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from browser_util import ARTIFACTS, CHROMIUM, charts, no_exception, open_page, settle
from viz_transformer import list_checkpoints, load_checkpoint
from viz_transformer.core import recipes
from viz_transformer.training.snapshots import load_training_snapshots

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]


def _pick(pg, name: str) -> None:
    pg.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
    pg.get_by_role("option", name=name, exact=True).click()
    settle(pg)


def test_compare_architectures_and_training_playback(server, page):  # noqa: F811
    url, root = server
    pg = page
    pg.goto(url)
    pg.get_by_role("heading", name="Overview").first.wait_for()
    settle(pg)
    _pick(pg, "zh-en-prefix")
    open_page(pg, "Compare architectures")
    codes = [c.inner_text().strip() for c in pg.locator('[data-testid="stMain"] [class*="st-key-output_"]').all()]
    text = "我是一名工程师。"
    trio = recipes.comparison(list_checkpoints(root)).values()          # the page's own choice of models
    expect = [load_checkpoint(info.path).run(text).output for info in trio]
    assert codes[:3] == expect
    assert set(codes[:3]) <= {"I am an engineer.", "I'm an engineer."}, codes     # all three translate it
    assert charts(pg) == 3            # the open tab: 3 source readings
    pg.screenshot(path=str(ARTIFACTS / "arch-outputs.png"), full_page=True)
    pg.get_by_role("tab", name="Masks").click()
    settle(pg)
    assert charts(pg) == 4            # 4 masks: two of the encoder-decoder, one each of the others
    pg.get_by_role("tab", name="Rank").click()
    settle(pg)
    assert charts(pg) == 2            # ranks, spectra
    pg.screenshot(path=str(ARTIFACTS / "arch-compare.png"), full_page=True)
    no_exception(pg)

    snaps = load_training_snapshots(root / "zh-en-prefix")
    open_page(pg, "Attention over training")
    main = pg.locator('[data-testid="stMain"]')
    step_metric = main.locator('[data-testid="stMetricValue"]').first
    assert step_metric.inner_text() == "0"
    for k in (1, 2):
        pg.get_by_role("button", name=re.compile("Next")).click()
        settle(pg)
        assert step_metric.inner_text() == f"{snaps.steps[k]:,}"
    pg.screenshot(path=str(ARTIFACTS / "training-playback.png"), full_page=True)
    pg.get_by_role("button", name=re.compile("Play")).click()
    last = f"{snaps.steps[-1]:,}"              # the first metric is the step (the fourth, the shipped step)
    pg.wait_for_function(f"() => document.querySelector('[data-testid=\"stMetricValue\"]').innerText === '{last}'")
    settle(pg)
    assert snaps.translations[-1][0] in main.inner_text()
    no_exception(pg)
