"""Time to pixels, from outside: the real server, headless Chromium, the time from a click (or a submitted
text) until the script has finished, no skeleton is left and every chart has drawn; and the bytes the
server sent for it (websocket frames + /_stcore/message responses).

    python -m benchmarks.pixels                          # every page at 32, 128, 512 tokens
    python -m benchmarks.pixels --pages Attention --tokens 128 --repeat 5 --trace /tmp/trace.json
    python -m benchmarks.pixels --pages Positions --before ../main --rounds 3   # another checkout, same run
    python -m benchmarks.pixels --tokens 128,512 --repeat 1 --busy   # first views, idle then busy

--repeat 1 times each page's first view after a new text (what it caches is computed then); more repeats report
the median of the later (warm) visits, the first beside it. --busy: the same walk again, with a new text of each
length, beside one busy-loop process per core (benchmarks/busy.py), and each page's busy / idle ratio (the
goal: no page slower than 3x its idle time; its first views: <= 1.0 s at 128 pieces, <= 2.0 s at 512).

The end of a rerun is read in the page itself, not guessed with a sleep: a MutationObserver sees the app
root's data-test-script-state go to "running" and back to "notRunning"; then every stPlotlyChart must have
its .main-svg, no stSkeleton or stale element may be left, and two animation frames must have passed
(the browser has painted). The clock starts in the same JavaScript task that clicks.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.stclient import Server
from benchmarks.texts import text_of
from viz_explorer.server import defaults

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1440, "height": 900}
TOKENS = (32, 128, 512)

# One JavaScript task: arm the observer, start the clock, act; resolves with the ms until pixels.
_MEASURE = """async ([action, arg, timeoutMs]) => {
  const root = () => document.querySelector('[data-test-script-state]');
  const drawn = () => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                        .every(c => c.querySelector('.main-svg'));
  const idle = () => root() && root().getAttribute('data-test-script-state') === 'notRunning'
                     && !document.querySelector('[data-testid="stSkeleton"]')
                     && !document.querySelector('[data-stale="true"]') && drawn();
  let ran = false, ended = null;
  const obs = new MutationObserver(records => { for (const m of records) {   // a run may start and end in one task
    if (m.oldValue === 'running' || m.target.getAttribute('data-test-script-state') === 'running') ran = true;
    if (m.target.getAttribute('data-test-script-state') === 'notRunning') ended = performance.now() - t0; } });
  obs.observe(document.body, {attributes: true, subtree: true, attributeOldValue: true,
                              attributeFilter: ['data-test-script-state']});
  const t0 = performance.now();
  if (action === 'click') {
    document.querySelector(arg).click();
  } else if (action === 'tab') {             // the arg-th tab of the page's main area
    document.querySelectorAll('[data-testid="stMain"] [role="tab"]')[Number(arg)].click();
  } else {                                   // 'submit': set the sidebar text and press Ctrl+Enter
    const ta = document.querySelector('[data-testid="stSidebar"] textarea');
    const set = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value').set;
    ta.focus(); set.call(ta, arg); ta.dispatchEvent(new Event('input', {bubbles: true}));
    ta.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', code: 'Enter', ctrlKey: true, bubbles: true}));
  }
  return await new Promise((resolve, reject) => {
    const check = () => {
      const waited = performance.now() - t0;
      if (waited > timeoutMs || (!ran && waited > 5000)) { obs.disconnect(); resolve({ms: null, ran}); return; }
      if (root() && root().getAttribute('data-test-script-state') === 'running') ran = true;
      if (ran && idle()) {
        requestAnimationFrame(() => requestAnimationFrame(() => { obs.disconnect();
          resolve({ms: performance.now() - t0, script_ms: ended, charts: document.querySelectorAll('[data-testid="stPlotlyChart"]').length,
                   exceptions: document.querySelectorAll('[data-testid="stException"]').length}); }));
      } else { setTimeout(check, 5); }
    };
    check();
  });
}"""


class Traffic:
    """Bytes the server sends to this page: websocket frames received and /_stcore/message bodies (CDP)."""

    def __init__(self, page):
        self.n = 0
        self.urls: dict[str, str] = {}
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.on("Network.webSocketFrameReceived", self._frame)
        cdp.on("Network.requestWillBeSent", lambda e: self.urls.__setitem__(e["requestId"], e["request"]["url"]))
        cdp.on("Network.loadingFinished", self._loaded)

    def _frame(self, e) -> None:
        r = e["response"]
        self.n += len(r["payloadData"]) * 3 // 4 if r.get("opcode") == 2 else len(r["payloadData"].encode())

    def _loaded(self, e) -> None:
        if "/_stcore/message" in self.urls.get(e["requestId"], ""):
            self.n += int(e.get("encodedDataLength", 0))


def settle(page, timeout_ms: int = 300_000) -> None:
    page.wait_for_function("""() => { const r = document.querySelector('[data-test-script-state]');
        return r && r.getAttribute('data-test-script-state') === 'notRunning'
          && !document.querySelector('[data-testid="stSkeleton"]')
          && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg')); }""",
                           timeout=timeout_ms)


def nav_pages(page) -> list[tuple[str, str]]:
    """(title, CSS selector of its link) for every page in the sidebar navigation."""
    links = page.eval_on_selector_all('[data-testid="stSidebarNav"] a',
                                      "els => els.map(a => [a.innerText.trim(), a.getAttribute('href')])")
    return [(title.split("\n")[-1].strip(), f'[data-testid="stSidebarNav"] a[href="{href}"]') for title, href in links]


def measure_action(page, traffic: Traffic, action: str, arg: str, timeout_ms: int = 300_000, tries: int = 3) -> dict:
    """One timed action. Rarely the frontend drops a click made just after a rerun ended (no run starts
    within 5 s): then the page is let settle and the action is made again."""
    for _ in range(tries):
        n0 = traffic.n
        r = page.evaluate(_MEASURE, [action, arg, timeout_ms])
        if r["ms"] is not None:
            break
        if r["ran"]:
            raise TimeoutError(f"{action} {arg}: not drawn after {timeout_ms / 1000:.0f} s")
        settle(page)
    else:
        raise RuntimeError(f"{action} {arg}: no rerun started after {tries} tries")
    page.wait_for_timeout(50)                   # late frames (e.g. the final script_finished) are counted
    return {"seconds": r["ms"] / 1000, "script_seconds": (r["script_ms"] or r["ms"]) / 1000, "bytes": traffic.n - n0,
            "charts": r["charts"], "exceptions": r["exceptions"]}


def measure(browser, url: str, tok, tokens=TOKENS, pages=None, repeat: int = 3, seed: int = 0,
            home: str = "Overview", log=print) -> list[dict]:
    """Time to pixels of every page (or those whose title contains one of `pages`) at each token count.
    For each count: a new text is submitted on the home page (timed too, as "new text"), then each page is
    opened from the navigation `repeat` times (away to the home page and back: the run is cached, as when
    a student moves between pages). Returns one row per (page, tokens)."""
    page = browser.new_page(viewport=VIEWPORT)
    traffic = Traffic(page)
    page.goto(url)
    settle(page)
    links = nav_pages(page)
    home_sel = next(sel for title, sel in links if title == home)
    chosen = [(t, s) for t, s in links if t != home and (not pages or any(p.lower() in t.lower() for p in pages))]
    rows = []
    for n in tokens:
        text = text_of(tok, n, seed=seed + n)
        if rows and chosen:                   # the text is submitted on the home page, not the last one visited
            measure_action(page, traffic, "click", home_sel)
        r = measure_action(page, traffic, "submit", text)
        rows.append({"page": "new text (" + home + ")", "tokens": n, **r, "runs": [r["seconds"]]})
        log(f"{n:>4} tokens  new text on {home}: {r['seconds']:.2f} s")
        for title, sel in ([(home, home_sel)] if not pages or home in pages else []) + chosen:
            runs = []
            for _ in range(repeat):
                away = home_sel if title != home else (chosen[0][1] if chosen else home_sel)
                measure_action(page, traffic, "click", away)
                runs.append(measure_action(page, traffic, "click", sel))
            best = min(runs, key=lambda r: r["seconds"])
            warm = runs[1:] or runs           # the first visit computes what the page caches; later ones reuse it
            row = {"page": title, "tokens": n, "seconds": statistics.median(r["seconds"] for r in warm),
                   "first_seconds": runs[0]["seconds"], "min_seconds": best["seconds"],
                   "script_seconds": statistics.median(r["script_seconds"] for r in warm),
                   "bytes": max(r["bytes"] for r in runs),           # the first visit: nothing cached in the browser
                   "charts": best["charts"], "exceptions": max(r["exceptions"] for r in runs),
                   "runs": [round(r["seconds"], 3) for r in runs]}
            rows.append(row)
            log(f"{n:>4} tokens  {title:32s} {row['seconds']:5.2f} s (first {row['first_seconds']:4.2f}, "
                f"run ends {row['script_seconds']:4.2f})  "
                f"{row['bytes'] / 1e6:6.2f} MB  {row['charts']} charts"
                + (f"  {row['exceptions']} EXCEPTIONS" if row["exceptions"] else ""))
            rows += _tabs(page, traffic, title, n, log)
    page.close()
    return rows


def _tabs(page, traffic: Traffic, title: str, n: int, log) -> list[dict]:
    """A page with lazy tabs: the time to pixels of a click on each of its other tabs, then back to the first."""
    labels = page.eval_on_selector_all('[data-testid="stMain"] [role="tab"]', "els => els.map(e => e.innerText.trim())")
    rows = []
    for i, label in list(enumerate(labels))[1:] + ([(0, labels[0])] if labels else []):
        try:
            r = measure_action(page, traffic, "tab", str(i))
        except RuntimeError as e:            # rare: the frontend dropped every click; not measured, said so
            log(f"{n:>4} tokens    tab {label!r} not measured: {e}")
            continue
        rows.append({"page": f"{title} › {label}", "tokens": n, **r, "runs": [r["seconds"]]})
    if rows:
        log(f"{n:>4} tokens    tabs: " + ", ".join(f"{r['page'].split(' › ')[1]} {r['seconds']:.2f} s" for r in rows))
    return rows


def table(rows: list[dict]) -> str:
    tokens = sorted({r["tokens"] for r in rows})
    pages = list(dict.fromkeys(r["page"] for r in rows))
    by = {(r["page"], r["tokens"]): r for r in rows}
    head = "| page | " + " | ".join(f"{n} tokens" for n in tokens) + f" | bytes @{tokens[-1]} |"
    lines = [head, "|---" * (len(tokens) + 2) + "|"]
    for p in pages:
        cells = [f"{by[(p, n)]['seconds']:.2f} s" if (p, n) in by else "" for n in tokens]
        last = by.get((p, tokens[-1]))
        lines.append(f"| {p} | " + " | ".join(cells) + f" | {last['bytes'] / 1e6:.2f} MB |" if last else " |")
    return "\n".join(lines)


BUSY_SEED = 1000            # the busy walk's texts: new ones, so that each page's first view computes again
ROUND_SEED = 2000           # --before --repeat 1: round i's texts (seed ROUND_SEED * i), new to both servers
GOALS_S = {128: 1.0, 512: 2.0}           # a page's first view, idle: the goal (s) by length
BUSY_GOAL = 3.0                          # busy / idle: the goal


def busy_table(idle: list[dict], busy: list[dict]) -> str:
    """Per page and length: idle and busy seconds, their ratio, and the goals."""
    by = {(r["page"], r["tokens"]): r["seconds"] for r in busy}
    lines = ["| page | tokens | idle | busy | busy / idle |", "|---|---|---|---|---|"]
    ratios, over = [], []
    for r in idle:
        key = (r["page"], r["tokens"])
        if key not in by:
            continue
        ratio = by[key] / r["seconds"]
        ratios.append((ratio, key))
        goal = GOALS_S.get(r["tokens"])
        if goal is not None and r["seconds"] > goal:
            over.append(f"{key[0]} at {key[1]}: {r['seconds']:.2f} s > {goal:g} s")
        lines.append(f"| {key[0]} | {key[1]} | {r['seconds']:.2f} s | {by[key]:.2f} s | {ratio:.1f}x |")
    if ratios:
        worst = max(ratios)
        lines.append(f"worst busy / idle: {worst[0]:.1f}x ({worst[1][0]} at {worst[1][1]}); goal <= {BUSY_GOAL:g}x "
                     + ("met" if worst[0] <= BUSY_GOAL else "NOT met"))
    lines.append("idle goals (<= 1.0 s at 128, <= 2.0 s at 512): " + ("met" if not over else "NOT met: " + "; ".join(over)))
    return "\n".join(lines)


def before_after(rounds: dict[str, list[list[dict]]]) -> str:
    """Per page: the median over rounds of each round's warm time, before -> now (rounds alternate)."""
    med = {side: {} for side in rounds}
    for side, runs in rounds.items():
        for rows in runs:
            for r in rows:
                med[side].setdefault((r["page"], r["tokens"]), []).append(r["seconds"])
    lines = ["| page | tokens | before | now | each round, before / now |", "|---|---|---|---|---|"]
    for key, now in med["now"].items():
        old = med["before"].get(key, [])
        if old:
            b, n = statistics.median(old), statistics.median(now)
            lines.append(f"| {key[0]} | {key[1]} | {b:.2f} s | {n:.2f} s ({b / n:.1f}×) | "
                         f"{', '.join(f'{x:.2f}' for x in old)} / {', '.join(f'{x:.2f}' for x in now)} |")
    return "\n".join(lines)


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a running server (default: start one on --checkpoints)")
    p.add_argument("--checkpoints", default=str(ROOT / "checkpoints"))
    p.add_argument("--checkpoint", default=defaults.CHECKPOINT,
                   help="the folder whose tokenizer makes the texts (default: the app's default model, which the pages run)")
    p.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    p.add_argument("--pages", nargs="*", help="only pages whose title contains one of these")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--before", help="another checkout (e.g. a worktree of main): its server is timed in the same "
                                    "run, in rounds alternating with this checkout's (a busy machine slows both)")
    p.add_argument("--rounds", type=int, default=3, help="with --before: rounds of each")
    p.add_argument("--busy", action="store_true", help="then the same walk (new texts) beside one busy-loop process "
                   "per core, and each page's busy / idle ratio")
    a = p.parse_args(argv)
    from playwright.sync_api import sync_playwright
    from viz_transformer.core.checkpoint import load_tokenizer, read_config
    folder = Path(a.checkpoints) / a.checkpoint
    tok = load_tokenizer(folder, read_config(folder))
    tokens = [int(x) for x in a.tokens.split(",")]
    if a.before:
        return _before_after(a, tok, tokens)
    server = None if a.url else Server(ROOT, a.checkpoints, log="/tmp/bench_pixels_server.log").__enter__()
    try:
        with sync_playwright() as pw:
            browser = launch(pw)
            rows = measure(browser, a.url or server.url, tok, tokens, a.pages, a.repeat)
            busy = None
            if a.busy:
                from benchmarks.busy import BusyLoops
                print(f"beside {os.cpu_count()} busy-loop processes:", flush=True)
                with BusyLoops():
                    busy = measure(browser, a.url or server.url, tok, tokens, a.pages, a.repeat, seed=BUSY_SEED)
            browser.close()
    finally:
        if server:
            server.__exit__()
    print("\n" + table(rows))
    if busy is not None:
        print("\n" + busy_table(rows, busy))
    if a.json:
        Path(a.json).write_text(json.dumps({"idle": rows, "busy": busy} if busy is not None else rows, indent=1))
    return 0


def _before_after(a, tok, tokens) -> int:
    from playwright.sync_api import sync_playwright
    before = Path(a.before).resolve()
    rounds: dict[str, list] = {"before": [], "now": []}
    with Server(before, before / "checkpoints", log="/tmp/bench_pixels_before.log") as old, \
            Server(ROOT, a.checkpoints, log="/tmp/bench_pixels_server.log") as now, sync_playwright() as pw:
        browser = launch(pw)
        for i in range(a.rounds):
            for side, server in ((("before", old), ("now", now)) if i % 2 == 0 else (("now", now), ("before", old))):
                print(f"round {i + 1}/{a.rounds}: {side} ({before if side == 'before' else ROOT})", flush=True)
                # --repeat 1 times first views: each round its own texts (both sides the same), or a later
                # round would find the first round's results cached
                seed = ROUND_SEED * (i + 1) if a.repeat == 1 else 0
                rounds[side].append(measure(browser, server.url, tok, tokens, a.pages, a.repeat, seed=seed))
        browser.close()
    print("\n" + before_after(rounds))
    if a.json:
        Path(a.json).write_text(json.dumps(rounds, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
