"""The browser tests' kit: the real `streamlit run app.py` on a free port, Debian's chromium, and one wait for a
page (the app's own signals: its script has run and finished, nothing is loading, every chart is drawn)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "test-artifacts"
TIMEOUT_MS = 90_000          # the machine may be busy training: be patient
# No running st.status left on the page (its spinner): the page is not still at work.
NO_PREVIEW = "!document.querySelector('[data-testid=\"stExpanderIconSpinner\"]')"

READY = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
         " return a && a.getAttribute('data-test-script-state') === 'notRunning'"
         " && !document.querySelector('[data-testid=\"stSkeleton\"]')"
         " && !document.querySelector('[data-testid=\"stSpinner\"]') && " + NO_PREVIEW +
         " && Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"]'))"
         ".every(c => c.querySelector('.main-svg')); }")
# Counts the changes of the app root's script state from here on (a click's rerun starts with one): after an
# action, settle() waits for the rerun to begin instead of sleeping, then for READY.
WATCH = ("() => { if (window.__vizWatch === undefined) { window.__vizWatch = new MutationObserver("
         "r => { window.__vizRuns += r.length; }); window.__vizWatch.observe(document.body, {subtree: true,"
         " attributes: true, attributeFilter: ['data-test-script-state']}); } window.__vizRuns = 0; }")
RAN = "() => window.__vizRuns === undefined || window.__vizRuns > 0"
START_MS = 1_500             # the most a rerun takes to begin after a click; an action with no rerun waits this


def settle(pg, timeout: int = TIMEOUT_MS) -> None:
    """Wait until the rerun the last action asked for (if any) has run and the page is READY. A new document
    (after goto) starts in the "initial" state, so READY alone waits for its first run."""
    from playwright.sync_api import TimeoutError as Timeout
    try:
        pg.wait_for_function(RAN, timeout=START_MS)
    except Timeout:          # nothing reran (a click that only moves the page): READY decides
        pass
    pg.wait_for_function(READY, timeout=timeout)
    pg.evaluate(WATCH)


# The main column's scroll position and height and every chart's box, the same over `frames` animation frames (at
# most `cap`): a scroll snap, a chart's relayout have come to rest.
STILL = """async ([frames, cap]) => {
  const m = document.querySelector('[data-testid="stMain"]');
  const look = () => JSON.stringify([window.scrollY, m && m.scrollTop, m && m.scrollHeight,
    ...[...document.querySelectorAll('[data-testid="stPlotlyChart"]')].map(c => {
      const r = c.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })]);
  let last = look(), same = 0, n = 0;
  while (same < frames && n++ < cap) {
    await new Promise(r => requestAnimationFrame(r));
    const now = look(); same = now === last ? same + 1 : 0; last = now;
  }
  return same >= frames; }"""


def still(pg, frames: int = 6) -> None:
    """Wait until nothing on the page moves (STILL) instead of sleeping after a scroll or before a screenshot."""
    assert pg.evaluate(STILL, [frames, 1200]), "the page kept moving for 1,200 frames"


def hover(pg, chart, x: float, y: float) -> None:
    """Move the mouse to (x, y) over `chart` (a locator of one st.plotly_chart) and wait until plotly has picked the
    point under it (its graph div's _hoverdata): plotly reports a click on the point it hovers."""
    gd = chart.locator(".js-plotly-plot").first.element_handle()
    gd.evaluate("gd => { gd._hoverdata = undefined; }")
    pg.mouse.move(x, y)
    pg.wait_for_function("gd => gd._hoverdata && gd._hoverdata.length > 0", arg=gd)


def no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0


def open_page(pg, title: str) -> None:
    """Open a page from the sidebar by its title; wait until it is drawn."""
    pg.locator('[data-testid="stSidebarNav"]').get_by_text(title, exact=True).click()
    pg.get_by_role("heading", name=title).first.wait_for()
    settle(pg)


def charts(pg) -> int:
    pg.locator('[data-testid="stPlotlyChart"] .main-svg').first.wait_for()
    return pg.locator('[data-testid="stPlotlyChart"]').count()


def open_drawn(pg, url: str) -> str:
    """Open url, wait until it is drawn, check that no exception is shown; returns the main column's text."""
    pg.goto(url)
    settle(pg)
    assert pg.locator('[data-testid="stException"]').count() == 0, url
    return pg.locator('[data-testid="stMain"]').inner_text()


def click_once(target, done, timeout_ms: int = 60_000) -> None:
    """Click `target` once, wait until `done` (a locator) shows, then until the run that drew it has finished. A
    teacher clicks once: a lost click fails the test, never a second try (`benchmarks/lost_clicks.py` makes clicks
    while a fragment reruns and counts the lost ones). Waiting for the run's end matters: `done` shows while the run
    is still drawing, and below it the page is the previous run's; a click there goes to a widget of that run (the
    previous question's mode), which this run no longer draws."""
    target.click()
    done.wait_for(timeout=timeout_ms)
    settle(target.page, timeout=timeout_ms)


def unfold(pg, title: str) -> None:
    """Open the expander titled `title` and wait until it has stopped growing: a click while it unfolds lands where
    a button was a frame ago (a click the page never sees)."""
    pg.locator('[data-testid="stExpander"] summary').filter(has_text=title).first.click()
    still(pg)


def download(page, target, timeout_ms: int = 60_000):
    """Click the download button `target` once; the Download the browser receives."""
    with page.expect_download(timeout=timeout_ms) as got:
        target.click()
    return got.value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def usable(folder: Path) -> bool:
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
        wait_healthy(url, proc, 90, ARTIFACTS / log_name)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_healthy(url: str, proc, seconds: float, log) -> None:
    """Wait until the server at url answers its health check; fail with its log if the process ends first or
    `seconds` pass."""
    deadline = time.time() + seconds
    while True:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"the server did not start; its log, {log}:\n{Path(log).read_text()[-3000:]}")
        time.sleep(0.5)


def legible(lang: str, server, check=None, narrow: tuple[str, ...] = ()) -> None:
    """The legibility walk (benchmarks/legibility.py) in one interface language, on the session's server when it
    serves the shipped checkpoints: every chart of every page and tab at 7, ~30 and ~120 pieces for each checkpoint;
    fails with the report's table. check(walker, page name, where) runs on each page once it is measured (the
    walk's per-page checks, one walk per language). LEGIBILITY_ARGS narrows it (its --lang leaves out the other
    language's test), and so does `narrow` (more of the walk's options, after LEGIBILITY_ARGS)."""
    import shlex

    import pytest

    from benchmarks import legibility
    url, root = server
    checkpoints = ROOT / "checkpoints"
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing")
    if not all((checkpoints / c / "model.safetensors").exists() for c in legibility.CHECKPOINTS):
        pytest.skip("the shipped checkpoints are missing")
    asked = legibility.options(shlex.split(os.environ.get("LEGIBILITY_ARGS", "")))
    if lang not in asked.lang:
        pytest.skip(f"LEGIBILITY_ARGS asks for --lang {' '.join(asked.lang)}")
    args = legibility.options(shlex.split(os.environ.get("LEGIBILITY_ARGS", "")) + list(narrow)
                              + ["--checkpoints", str(checkpoints), "--lang", lang, "--json", f"report-{lang}.json"]
                              + (["--url", url] if Path(root).resolve() == checkpoints.resolve() else []))
    views, path = legibility.walk(args, log=lambda *a: print(*a, flush=True), check=check)
    rows = legibility.problems(views)
    charts = sum(len(v["charts"]) for v in views)
    print(f"\n{legibility.summary(views)}\nreport {path}")
    assert charts, "no chart was measured"
    if any(v["exceptions"] or v.get("error") for v in views):
        pytest.fail(legibility.summary(views), pytrace=False)
    if rows:
        pytest.fail(f"{len(rows)} of {charts} charts are illegible (report: {path}, PNGs beside it)\n"
                    + legibility.table(rows) + "\n\n" + legibility.summary(views), pytrace=False)


class Offline:
    """A walk's check (legible): no request of the walk's page leaves the app's own server (the page icon once came
    from fonts.gstatic.com, which fails offline and from mainland China). Call it on each page, then .verify()."""

    def __init__(self):
        self.walker = self.icon = None

    def __call__(self, walker, name: str, where: dict) -> None:
        self.walker = walker
        self.icon = self.icon or walker.pg.eval_on_selector('link[rel~="icon"]', "l => l.href")

    def verify(self) -> None:
        from urllib.parse import urlparse
        assert self.walker, "the walk measured no page"
        host = urlparse(self.walker.url).hostname
        fetched = [u for u in self.walker.traffic.urls.values() if not u.startswith(("data:", "blob:"))]
        remote = sorted({u for u in fetched if urlparse(u).hostname != host})
        assert not remote, f"requests that left {host}: {remote}"
        assert urlparse(self.icon).hostname == host, f"the page icon is not the shipped one: {self.icon}"
        assert any("MaterialSymbols" in u for u in fetched), "the navigation's icon font (Streamlit's own) was not asked for"
