"""End-to-end: the real `streamlit run app.py` server driven by Debian's chromium through Playwright.

Types a Chinese sentence, opens every page, clicks a model-view tile, steps decoding three times,
and saves a screenshot per page under test-artifacts/ (look at them).
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "test-artifacts"
SENTENCE = "他是我的朋友。"
TIMEOUT_MS = 90_000          # the machine may be busy training: be patient
# No running st.status left on the page (its spinner): the page is not still at work.
NO_PREVIEW = "!document.querySelector('[data-testid=\"stExpanderIconSpinner\"]')"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _usable(folder: Path) -> bool:
    try:
        from viz_transformer import load_checkpoint
        load_checkpoint(folder)
        return True
    except Exception:   # noqa: BLE001 - any failure: fall back to the tiny checkpoints
        return False


@contextlib.contextmanager
def app_server(root: Path, log_name: str, **env):
    """`streamlit run app.py` on a free port over the checkpoints in `root` (more environment in env), its
    output in test-artifacts/log_name; yields the URL once /_stcore/health answers, stops it after."""
    port = _free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.port", str(port), "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=dict(os.environ, VIZ_CHECKPOINTS=str(root), **env), stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"streamlit did not start; see {ARTIFACTS / log_name}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def server(ckpt_root):
    """The real server on a free port; the shipped checkpoints if zh-en loads, else the tiny ones."""
    real = ROOT / "checkpoints"
    root = real if _usable(real / "zh-en") else ckpt_root
    with app_server(root, "server.log") as url:
        yield url, root


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1440, "height": 2200})
        pg.set_default_timeout(TIMEOUT_MS)
        yield pg
        browser.close()


def _settle(pg) -> None:
    """Wait until streamlit has finished the rerun (no running indicator, no spinner)."""
    pg.wait_for_timeout(500)
    pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
                         " && !document.querySelector('[data-testid=\"stSpinner\"]') && " + NO_PREVIEW, timeout=TIMEOUT_MS)
    pg.wait_for_timeout(800)


def _open(pg, title: str) -> None:
    pg.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
    pg.get_by_role("heading", name=title).first.wait_for()
    _settle(pg)


def _no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0


def _charts(pg) -> int:
    pg.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    return pg.locator('[data-testid="stPlotlyChart"]').count()


def test_explorer_end_to_end(server, page):
    url, root = server
    pg = page
    pg.goto(url)
    pg.get_by_role("heading", name="Overview").first.wait_for()
    _settle(pg)
    if root.name == "checkpoints":    # the real translator opens by default
        assert "enc-dec · 3+3 layers" in pg.locator('[data-testid="stSidebar"]').inner_text()
    else:                             # tiny checkpoints: pick the translator explicitly
        pg.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first.click()
        pg.get_by_role("option", name="tiny-zh-en").click()
        _settle(pg)

    box = pg.locator('[data-testid="stSidebar"] textarea')
    box.fill(SENTENCE)
    box.press("Control+Enter")
    _settle(pg)
    main = pg.locator('[data-testid="stMain"]')
    # the pieces table shows the typed sentence's pieces; the translation box is filled
    assert pg.get_by_text("Your text as pieces").is_visible()
    assert pg.locator('[data-testid="stDataFrame"]').count() >= 2
    assert pg.locator('[data-testid="stCode"]').first.inner_text().strip()
    pg.screenshot(path=str(ARTIFACTS / "1-overview.png"))
    _no_exception(pg)

    _open(pg, "Attention: heads and layers")
    assert _charts(pg) == 3
    assert "encoder self-attention, layer 0, head 0" in main.inner_text()
    # a click near the bottom-right of the model view opens the last layer's last head
    grid = pg.locator('[data-testid="stPlotlyChart"]').nth(1).locator(".nsewdrag").first
    bb = grid.bounding_box()
    pg.mouse.move(bb["x"] + bb["width"] * 0.97, bb["y"] + bb["height"] * 0.97)
    pg.wait_for_timeout(300)
    pg.mouse.click(bb["x"] + bb["width"] * 0.97, bb["y"] + bb["height"] * 0.97)
    _settle(pg)
    assert "encoder self-attention, layer 0, head 0" not in main.inner_text()
    pg.screenshot(path=str(ARTIFACTS / "2-attention.png"))
    _no_exception(pg)

    # tabbed pages draw the open tab only; a click on another tab runs and draws that one
    for n, title, at_least, tab, then in [(3, "Attention step by step", 3, "2 · Scores, mask, softmax", 4),
                                          (4, "Masks", 1, "What each head applied", 4),
                                          (5, "Positional encoding", 3, None, 0)]:
        _open(pg, title)
        assert _charts(pg) >= at_least
        if tab:
            pg.get_by_role("tab", name=tab).click()
            _settle(pg)
            assert _charts(pg) == then
        pg.screenshot(path=str(ARTIFACTS / f"{n}-{title.lower().replace(' ', '-')}.png"))
        _no_exception(pg)

    _open(pg, "Step-through decoding")
    assert pg.get_by_text("Step 0 of").is_visible()
    for i in range(1, 4):
        pg.get_by_role("button", name=re.compile("Next")).click()
        pg.get_by_text(f"Step {i} of").wait_for()
        _settle(pg)
    assert _charts(pg) >= 2            # candidates + cross- and self-attention of the newest query
    assert "[begin]" in pg.locator('[data-testid="stCode"]').first.inner_text()
    pg.screenshot(path=str(ARTIFACTS / "6-decoding.png"))
    _no_exception(pg)
    # Play advances on its own; Pause stops it
    total = int(re.search(r"Step 3 of (\d+)", main.inner_text()).group(1))
    pg.get_by_role("button", name=re.compile("Play")).click()
    pg.get_by_text(f"Step {min(total - 1, 5)} of {total}").wait_for()      # at the last step it says Play again
    pg.get_by_role("button", name=re.compile("Pause")).click()
    _settle(pg)
    _no_exception(pg)
