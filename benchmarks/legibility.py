"""The legibility walk: the real server in headless Chromium, every page and every tab, for each checkpoint,
interface language and text length; tests/legibility.js measures each drawn chart in the page (a plot side
under 110 px, two labels overlapping by their rotated boxes, a label past the chart's edge, a colour bar or
legend taller than its plot). Used by tests/test_browser_legibility.py; from the shell, for one page:

    python -m benchmarks.legibility --pages masks --lang zh --lengths 120 --checkpoint zh-en
    python -m benchmarks.legibility                      # the whole walk (3 checkpoints x 2 languages x 3 lengths)

Pages are named by their address (overview, masks, step_by_step, ...). Failing charts are saved as PNGs and
the whole report as JSON under test-artifacts/legibility/ (--shots all: every chart, to check the measurer).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.pixels import ARGS, CHROMIUM, Traffic, measure_action, nav_pages, settle
from benchmarks.stclient import Server
from benchmarks.texts import text_of

MEASURER = (ROOT / "tests" / "legibility.js").read_text(encoding="utf-8")
OUT = ROOT / "test-artifacts" / "legibility"
VIEWPORT = {"width": 1400, "height": 1000}           # the issue's own measurement
CHECKPOINTS = {"zh-en": "zh", "zh-en-decoder": "zh", "en-stories": "en"}    # checkpoint -> language of its text
LENGTHS = (7, 30, 120)                               # pieces of the text (the short one is a fixed sentence)
LANGS = ("en", "zh")
SHORT = {"zh": "我是一名工程师。", "en": "The dog ran to the park."}
TIMEOUT_MS = 300_000

# Inside both actions below: the app root says the run ended, no skeleton or stale element is left, every
# chart has drawn.
_IDLE = """  const root = () => document.querySelector('[data-test-script-state]');
  const drawn = () => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'));
  const idle = () => root() && root().getAttribute('data-test-script-state') === 'notRunning'
                     && !document.querySelector('[data-testid="stSkeleton"]')
                     && !document.querySelector('[data-stale="true"]') && drawn();
"""

# A click on a tab, then wait until drawn. A lazy tab (viz_explorer/kit/widgets.lazy_tabs) reruns the script; a plain
# st.tabs does not: it is drawn when no run has started after quietMs and its panel has content.
_TAB = """async ([i, quietMs, timeoutMs]) => {
""" + _IDLE + """  const panel = () => [...document.querySelectorAll('[data-testid="stMain"] [role="tabpanel"]')]
                        .find(p => !p.hidden && p.offsetParent && p.querySelector('[data-testid="stElementContainer"]'));
  let ran = false;
  const obs = new MutationObserver(() => { if (root() && root().getAttribute('data-test-script-state') === 'running') ran = true; });
  obs.observe(document.body, {attributes: true, subtree: true, attributeFilter: ['data-test-script-state']});
  const t0 = performance.now();
  [...document.querySelectorAll('[data-testid="stMain"] [role="tab"]')].filter(e => e.offsetParent)[i].click();
  return await new Promise(resolve => {
    const check = () => {
      const t = performance.now() - t0;
      if (root() && root().getAttribute('data-test-script-state') === 'running') ran = true;
      if (t > timeoutMs) { obs.disconnect(); resolve({ok: false, ran}); return; }
      if (idle() && (ran || (t > quietMs && panel()))) {
        requestAnimationFrame(() => requestAnimationFrame(() => { obs.disconnect(); resolve({ok: true, ran, ms: t}); }));
      } else { setTimeout(check, 20); }
    };
    check();
  });
}"""

# One action in the main area (click a button, or type into a text input and press Enter), then wait until the
# rerun it starts has drawn (as pixels.py's _MEASURE does for the sidebar).
_ACT = """async ([sel, value, timeoutMs]) => {
""" + _IDLE + """  const el = document.querySelector(sel);
  if (!el || el.disabled) return {ok: false, missing: true};
  let ran = false;
  const obs = new MutationObserver(() => { if (root() && root().getAttribute('data-test-script-state') === 'running') ran = true; });
  obs.observe(document.body, {attributes: true, subtree: true, attributeFilter: ['data-test-script-state']});
  const t0 = performance.now();
  if (value === null) { el.click(); } else {
    const set = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
    el.focus(); set.call(el, value); el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', code: 'Enter', bubbles: true}));
  }
  return await new Promise(resolve => {
    const check = () => {
      const t = performance.now() - t0;
      if (root() && root().getAttribute('data-test-script-state') === 'running') ran = true;
      if (t > timeoutMs || (!ran && t > 5000)) { obs.disconnect(); resolve({ok: false, ran}); return; }
      if (ran && idle()) requestAnimationFrame(() => requestAnimationFrame(() => { obs.disconnect(); resolve({ok: true}); }));
      else setTimeout(check, 20);
    };
    check();
  });
}"""

# Open every collapsed expander of the main area that holds a chart (its charts are not drawn while closed).
_EXPAND = """() => { let n = 0;
  document.querySelectorAll('[data-testid="stMain"] [data-testid="stExpander"] details:not([open])').forEach(d => {
    if (d.querySelector('[data-testid="stPlotlyChart"]')) { d.querySelector('summary').click(); n++; } });
  return n; }"""


def texts(folder: Path, lang: str, lengths=LENGTHS) -> dict:
    """{nominal length: (text, its pieces by the checkpoint's tokenizer, specials not counted)}, and "tok"."""
    from viz_transformer import load_checkpoint
    tok = load_checkpoint(folder).tokenizer          # ours or an imported (Hugging Face) folder alike
    out = {"tok": tok}
    for n in lengths:
        text = SHORT[lang] if n <= 10 else text_of(tok, n + 1, seed=n, lang=lang)   # text_of counts [end]
        out[n] = (text, len(tok.encode(text)))
    return out


def variant(tok, text: str) -> str:
    """Text B for activation patching: `text` with one character (Chinese) or word (English) changed, cut into
    as many pieces as `text` (the page patches position by position), or "" when none is found."""
    n = len(tok.encode(text))
    if text[:1].isascii():
        words = text.split(" ")
        tries = (" ".join(words[:i] + [w] + words[i + 1:]) for i in range(len(words))
                 for w in ("A", "The", "She", "He", "It", "cat", "dog", "big", "run", "and"))
    else:
        tries = (text[:i] + c + text[i + 1:] for i in range(len(text)) for c in "你他她我好大小人")
    return next((b for b in tries if b != text and len(tok.encode(b)) == n), "")


def _page_name(href: str) -> str:
    return href.rstrip("/").rsplit("/", 1)[-1].split("?")[0] if href.rstrip("/").count("/") > 2 else "overview"


def _slug(s: str) -> str:
    return re.sub(r"[^\w]+", "-", s, flags=re.UNICODE).strip("-")[:40]


class Walker:
    """One browser page on one server; walks (checkpoint, language, text) combinations, page by page."""

    def __init__(self, browser, url: str, root: Path, shots: str = "fail", out: Path = OUT, log=print, check=None):
        self.browser, self.url, self.root, self.shots, self.out, self.log = browser, url, Path(root), shots, out, log
        self.check = check      # check(walker, page name, where) after each page is measured: a test's own checks
        self.pg = self.tok = None
        self.views: list[dict] = []

    # -- driving the app ---------------------------------------------------------------------------------
    def open(self, lang: str) -> None:
        if self.pg:
            self.pg.close()
        self.pg = self.browser.new_page(viewport=VIEWPORT)
        self.pg.set_default_timeout(TIMEOUT_MS)
        self.traffic = Traffic(self.pg)
        self.pg.goto(f"{self.url}/?lang={lang}")
        settle(self.pg, TIMEOUT_MS)
        self.links = {_page_name(sel.split('href="')[1].rstrip('"]')): (title, sel) for title, sel in nav_pages(self.pg)}
        self.here = "overview"

    def goto(self, name: str) -> None:
        if name != self.here:
            measure_action(self.pg, self.traffic, "click", self.links[name][1], TIMEOUT_MS)
            self.here = name

    def text(self) -> str:
        return self.pg.locator('[data-testid="stSidebar"] textarea').input_value()

    def submit(self, text: str) -> None:
        if self.text() != text:
            measure_action(self.pg, self.traffic, "submit", text, TIMEOUT_MS)

    def current_checkpoint(self) -> str:
        return self.pg.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"] input').first.input_value().strip()

    def checkpoint(self, name: str) -> None:
        box = self.pg.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
        option = self.pg.get_by_role("option", name=name, exact=True)
        for _ in range(3):              # a click on a page just drawn may not open the list: open it again
            box.get_by_role("combobox").click()
            try:
                option.wait_for(timeout=10_000)
                break
            except Exception:  # noqa: BLE001 - playwright's TimeoutError: try again, then let click() say it
                self.pg.keyboard.press("Escape")
        option.click()
        self.pg.wait_for_timeout(300)
        settle(self.pg, TIMEOUT_MS)
        assert self.current_checkpoint() == name, f"could not choose checkpoint {name}"

    def tabs(self) -> list[tuple[str, bool]]:
        """The visible tabs of the main area (nested ones too, once their panel is open): (label, selected)."""
        return [tuple(x) for x in self.pg.eval_on_selector_all(
            '[data-testid="stMain"] [role="tab"]',
            "els => els.filter(e => e.offsetParent).map(e => [e.innerText.trim(), e.getAttribute('aria-selected') === 'true'])")]

    def click_tab(self, i: int) -> None:
        if self.tabs()[i][1]:
            return
        r = self.pg.evaluate(_TAB, [i, 1000, TIMEOUT_MS])
        if not r["ok"]:
            raise TimeoutError(f"tab {i} on {self.here}: not drawn after {TIMEOUT_MS / 1000:.0f} s")

    # -- measuring -----------------------------------------------------------------------------------------
    def measure(self, where: dict) -> dict:
        if self.pg.evaluate(_EXPAND):
            self.pg.wait_for_timeout(600)
            settle(self.pg, TIMEOUT_MS)
        charts = self.pg.evaluate(MEASURER, {})
        exceptions = self.pg.locator('[data-testid="stException"]').count()
        view = {**where, "charts": charts, "exceptions": exceptions}
        for c in charts:
            bad = bool(c["problems"])
            if self.shots == "all" or (bad and self.shots == "fail"):
                name = (f"{where['checkpoint']}-{where['lang']}-{where['length']}-{where['page']}"
                        f"-{where['tab_index']}-{c['index']}-{'FAIL' if bad else 'ok'}-{_slug(c['title'])}.png")
                c["png"] = str((self.out / "png" / name).relative_to(ROOT)) if self.out.is_relative_to(ROOT) else name
                try:
                    self.pg.locator('[data-testid="stPlotlyChart"]').nth(c["index"]).screenshot(
                        path=str(self.out / "png" / name), timeout=20_000)
                except Exception as e:  # noqa: BLE001 - a screenshot is a help, not the measurement
                    c["png"] = f"(no screenshot: {type(e).__name__})"
        self.views.append(view)
        n_bad = sum(bool(c["problems"]) for c in charts)
        self.log(f"    {where['page']:>14} {where['tab'][:28]:28s} {len(charts):2d} charts, {n_bad} bad"
                 + (f", {exceptions} EXCEPTIONS" if exceptions else ""))
        return view

    def act(self, sel: str, value=None) -> bool:
        r = self.pg.evaluate(_ACT, [sel, value, TIMEOUT_MS])
        if not r["ok"] and r.get("ran"):
            raise TimeoutError(f"{sel} on {self.here}: not drawn after {TIMEOUT_MS / 1000:.0f} s")
        return r["ok"]

    def prepare(self, name: str) -> None:
        """What a student does first on a page that draws nothing until asked: step decoding three times
        (its charts show a step), give activation patching, when its own text B does not line up with A, one that does."""
        if name == "decoding":
            for _ in range(3):
                if not self.act('[data-testid="stMain"] .st-key-dc_next button'):
                    break
        elif name == "patching" and self.tok is not None:
            sel = '[data-testid="stMain"] [class*="st-key-pt_text_"] input'
            if self.pg.locator('[data-testid="stPlotlyChart"]').count():
                return                                  # the page's own text B lines up
            b = variant(self.tok, self.text())
            if b and self.pg.locator(sel).count() and self.pg.locator(sel).first.input_value() != b:
                self.act(sel, b)

    def page(self, name: str, where: dict) -> None:
        self.goto(name)
        self.prepare(name)
        if not self.tabs():
            self.measure({**where, "page": name, "tab": "", "tab_index": 0})
            return
        done: list[str] = []
        while len(done) < 40:                   # tabs are looked up again after each click: nested ones appear
            todo = [(i, label) for i, (label, _) in enumerate(self.tabs()) if label not in done]
            if not todo:
                break
            i, label = todo[0]
            self.click_tab(i)
            self.measure({**where, "page": name, "tab": label, "tab_index": len(done)})
            done.append(label)

    def walk(self, checkpoints=tuple(CHECKPOINTS), langs=LANGS, lengths=LENGTHS, pages=None) -> list[dict]:
        (self.out / "png").mkdir(parents=True, exist_ok=True)
        for lang in langs:
            self.open(lang)
            names = [n for n in self.links if not pages or n in pages]
            missing = set(pages or ()) - set(self.links)
            if missing:
                raise ValueError(f"no page {sorted(missing)}; pages: {sorted(self.links)}")
            for ck in checkpoints:
                made = texts(self.root / ck, CHECKPOINTS.get(ck, "zh"), lengths)
                self.tok = made["tok"]
                if self.current_checkpoint() != ck:      # switch on the new model's short text: a cheap run
                    self.submit(made[lengths[0]][0])
                    self.checkpoint(ck)
                for k, n in enumerate(lengths):
                    text, pieces = made[n]
                    self.log(f"{lang} · {ck} · {n} ({pieces} pieces): {text[:40]}")
                    self.submit(text)
                    order = names if k % 2 == 0 else names[::-1]
                    if self.here in order:               # the text was submitted here: measure it first
                        order = [self.here] + [p for p in order if p != self.here]
                    where = {"checkpoint": ck, "lang": lang, "length": n, "pieces": pieces}
                    for name in order:
                        t0 = time.perf_counter()
                        try:
                            self.page(name, where)
                        except Exception as e:  # noqa: BLE001 - said in the report, and the walk goes on
                            self.log(f"    {name}: NOT MEASURED: {type(e).__name__}: {e}")
                            self.views.append({**where, "page": name, "tab": "", "tab_index": 0, "charts": [],
                                               "exceptions": 0, "error": f"{type(e).__name__}: {e}"})
                            settle(self.pg, TIMEOUT_MS)
                        else:
                            if self.check:               # its failure ends the walk: a test's assertion
                                self.check(self, name, where)
                        self.views[-1]["seconds"] = round(time.perf_counter() - t0, 2)
        return self.views

# -- reports -------------------------------------------------------------------------------------------
def problems(views: list[dict]) -> list[dict]:
    """One row per failing chart."""
    rows = []
    for v in views:
        for c in v["charts"]:
            if c["problems"]:
                rows.append({k: v[k] for k in ("page", "tab", "checkpoint", "lang", "length", "pieces")}
                            | {"chart": c["index"], "title": c["title"], "kinds": sorted({p["kind"] for p in c["problems"]}),
                               "problems": c["problems"], "png": c.get("png")})
    return rows


def summary(views: list[dict]) -> str:
    charts = [(v, c) for v in views for c in v["charts"]]
    bad = [(v, c) for v, c in charts if c["problems"]]
    three = [c for _, c in bad if {p["kind"] for p in c["problems"]} - {"legend"}]
    lines = [f"{len(bad)} of {len(charts)} charts illegible in {len(views)} views "
             f"({len(three)} by the plot-size, overlap and edge measures alone, without the legend rule)"]
    kinds = Counter(p["kind"] for _, c in bad for p in {p["kind"]: p for p in c["problems"]}.values())
    lines.append("by kind (a chart may have several): " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    by_page = Counter((v["page"], v["tab_index"]) for v, _ in bad)
    total = Counter((v["page"], v["tab_index"]) for v, _ in charts)
    tabname = {(v["page"], v["tab_index"]): v["tab"] for v in views if v["lang"] == "en"} or \
              {(v["page"], v["tab_index"]): v["tab"] for v in views}
    lines.append("by page/tab (bad / measured):")
    for key in sorted(total, key=lambda k: (-by_page[k], k)):
        lines.append(f"  {key[0]:>14} {tabname.get(key, str(key[1]))[:30]:30s} {by_page[key]:4d} / {total[key]}")
    err = [v for v in views if v.get("error")]
    if err:
        lines.append("NOT MEASURED: " + "; ".join(f"{v['page']} ({v['checkpoint']}, {v['lang']}, {v['length']}): {v['error']}"
                                                  for v in err))
    exc = [v for v in views if v["exceptions"]]
    if exc:
        lines.append("EXCEPTIONS on: " + ", ".join(f"{v['page']}/{v['tab']} ({v['checkpoint']}, {v['lang']}, {v['length']})"
                                                   for v in exc))
    return "\n".join(lines)


def table(rows: list[dict], limit: int = 400) -> str:
    head = f"{'page':>14} | {'tab':20} | {'checkpoint':13} | lang | len | {'chart title':40} | kind | labels"
    out = [head, "-" * len(head)]
    for r in rows[:limit]:
        for p in r["problems"]:
            out.append(f"{r['page']:>14} | {r['tab'][:20]:20} | {r['checkpoint']:13} | {r['lang']:4} | {r['length']:3} | "
                       f"{r['title'][:40]:40} | {p['kind']} | {p['detail']}; " + "; ".join(p["labels"][:3]))
    if len(rows) > limit:
        out.append(f"... and {len(rows) - limit} more charts (see the JSON report)")
    return "\n".join(out)


def save(views: list[dict], out: Path = OUT, seconds: float = 0.0, name: str = "report.json") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    charts = sum(len(v["charts"]) for v in views)
    rows = problems(views)
    path = out / name
    path.write_text(json.dumps({"charts": charts, "bad_charts": len(rows), "seconds": round(seconds, 1),
                                "summary": summary(views), "problems": rows, "views": views},
                               ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def run(checkpoints_dir: Path, checkpoints=tuple(CHECKPOINTS), langs=LANGS, lengths=LENGTHS, pages=None,
        shots: str = "fail", url: str | None = None, out: Path = OUT, log=print, check=None) -> tuple[list[dict], float]:
    """Start a server (unless url), one headless Chromium, walk (Walker's check); returns the views and the wall time."""
    from playwright.sync_api import sync_playwright
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    server = None if url else Server(ROOT, checkpoints_dir, log=str(out / "server.log")).__enter__()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                w = Walker(browser, url or server.url, checkpoints_dir, shots, out, log, check)
                views = w.walk(checkpoints, langs, lengths, pages)
            finally:
                browser.close()
    finally:
        if server:
            server.__exit__()
    return views, time.perf_counter() - t0


def options(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a running server (its checkpoints must be --checkpoints)")
    p.add_argument("--checkpoints", default=str(ROOT / "checkpoints"), help="the checkpoints folder")
    p.add_argument("--checkpoint", nargs="*", default=list(CHECKPOINTS), help="which checkpoints (default: all three)")
    p.add_argument("--lang", nargs="*", default=list(LANGS), choices=LANGS)
    p.add_argument("--lengths", nargs="*", type=int, default=list(LENGTHS))
    p.add_argument("--pages", nargs="*", help="page addresses: overview masks step_by_step architectures ...")
    p.add_argument("--shots", choices=("fail", "all", "none"), default="fail")
    p.add_argument("--out", default=str(OUT))
    p.add_argument("--json", default="report.json", help="the report's file name under --out")
    return p.parse_args(argv)


def walk(a: argparse.Namespace, log=print, check=None) -> tuple[list[dict], Path]:
    """The walk the options ask for (Walker's check); returns the views and the saved report's path."""
    out = Path(a.out).resolve()
    views, seconds = run(Path(a.checkpoints), a.checkpoint, a.lang, a.lengths, a.pages, a.shots, a.url, out, log, check)
    return views, save(views, out, seconds, a.json)


def main(argv=None) -> int:
    views, path = walk(options(argv))
    print("\n" + table(problems(views)))
    print("\n" + summary(views))
    print(f"\nwall time {json.loads(path.read_text(encoding='utf-8'))['seconds']:.0f} s; report {path}")
    return 1 if problems(views) else 0


if __name__ == "__main__":
    sys.exit(main())
