"""Peer benchmark: BertViz's model_view on the same tensors, drawn in the same Chromium.

    python -m benchmarks.peer_bertviz [--tokens 32,128,512] [--repeat 3] [--timeout 60] [--json out.json]

Input: zh-en's encoder self-attention (every layer × head, `encoder.{l}.self_attn.hook_pattern`) for a text of
N pieces (`texts.text_of`), tokens `run.src_pieces`. BertViz's HTML loads require.js, d3 and jQuery from
cdnjs; those are inlined from benchmarks/vendor/ so the page draws offline. Timed from navigation to
"every thumbnail line is in the DOM" plus two animation frames (the frame that holds them was painted).
Needs bertviz (requirements-bench.txt); prints a skip message without it.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
CDN = "https://cdnjs.cloudflare.com/ajax/libs/"
REQUIRE_TAG = f'<script src="{CDN}require.js/2.3.6/require.min.js"></script>'
PATHS = {f"'{CDN}d3/5.7.0/d3.min'": "d3-5.7.0.min.js",            # as model_view.js names them
         f"'{CDN}jquery/2.0.0/jquery.min'": "jquery-2.1.0.min.js"}  # 2.0.0 is not on npm: vendor/README.md
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
# Every thumbnail line drawn (one per layer × head × query × key), then two frames: the first frame after
# the DOM is complete has been laid out and painted when the second one's callback runs.
DRAWN = "n => document.getElementsByTagName('line').length >= n"
TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def have_bertviz() -> bool:
    try:
        import bertviz  # noqa: F401
        return True
    except ImportError:
        return False


def bertviz_html(tokens: list[str], attentions: list) -> str:
    """The HTML BertViz itself returns for model_view(attention, tokens), unchanged (CDN links and all)."""
    from bertviz import model_view
    return model_view(attention=attentions, tokens=tokens, html_action="return").data


def offline_html(html: str) -> str:
    """BertViz's page with its three CDN scripts inlined from benchmarks/vendor/: self-contained."""
    if REQUIRE_TAG not in html or any(url not in html for url in PATHS):
        raise ValueError("this bertviz's HTML names other CDN URLs than the vendored ones; see vendor/README.md")
    require = (VENDOR / "require-2.3.6.min.js").read_text(encoding="utf-8")
    html = html.replace(REQUIRE_TAG, f"<script>{require}</script>")
    for url, name in PATHS.items():
        data = base64.b64encode((VENDOR / name).read_bytes()).decode("ascii")
        html = html.replace(url, f"'data:text/javascript;base64,{data}'")   # require.js adds no .js to data:
    return "<!doctype html><meta charset='utf-8'>" + html


def renderer_pids(browser) -> set[int]:
    """Process ids of the browser's renderers (asked of the browser process, which answers while a
    renderer is busy)."""
    cdp = browser.new_browser_cdp_session()
    try:
        return {p["id"] for p in cdp.send("SystemInfo.getProcessInfo")["processInfo"] if p["type"] == "renderer"}
    finally:
        cdp.detach()


def kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def draw_seconds(browser, url: str, n_lines: int, timeout_s: float) -> float | None:
    """Seconds from navigation to the model view drawn, on a fresh page; None past timeout_s.

    Past the timeout the renderers started for the page are killed: Playwright's own timeout waits for a
    renderer busy in BertViz's script (past 10 GB after a minute at 512 pieces), and so does closing the page."""
    before = renderer_pids(browser)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    watchdog = None
    try:
        t0 = time.perf_counter()
        page.goto(url, wait_until="commit", timeout=timeout_s * 1000)
        ours = renderer_pids(browser) - before       # the page's renderer (and maybe Chromium's spare one)
        watchdog = threading.Timer(max(0.0, timeout_s - (time.perf_counter() - t0)), kill, (ours,))
        watchdog.start()
        page.wait_for_function(DRAWN, arg=n_lines, polling=50, timeout=timeout_s * 1000)
        page.evaluate(TWO_FRAMES)
        seconds = time.perf_counter() - t0
        return seconds if seconds <= timeout_s else None
    except Exception as e:      # playwright's TimeoutError, or "Target crashed" after the watchdog
        if errors:
            raise RuntimeError(f"BertViz's page failed: {errors[0]}") from e
        return None
    finally:
        if watchdog is not None:
            watchdog.cancel()
        page.close()


def measure(browser, tokens: list[str], attentions: list, repeat: int = 3, timeout_s: float = 60) -> dict:
    """Bytes and draw time of BertViz's model view for `attentions` (one [1, head, q, k] tensor per layer)
    and `tokens`, in `browser` (a Playwright sync Browser). seconds: median of `repeat` fresh pages; None
    (and timed_out) when a draw took longer than timeout_s, after which the rest are not tried."""
    html = bertviz_html(tokens, attentions)
    page = offline_html(html)
    n_layers, n_heads = len(attentions), int(attentions[0].shape[1])
    n_lines = n_layers * n_heads * len(tokens) * len(tokens)
    runs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bertviz.html"
        path.write_text(page, encoding="utf-8")
        for _ in range(repeat):
            s = draw_seconds(browser, path.as_uri(), n_lines, timeout_s)
            if s is None:
                break
            runs.append(s)
    timed_out = len(runs) < repeat
    return {"peer": "bertviz.model_view", "n_tokens": len(tokens), "layers": n_layers, "heads": n_heads,
            "svg_lines": n_lines, "bytes_bertviz_html": len(html.encode("utf-8")),
            "bytes_loaded": len(page.encode("utf-8")), "seconds": None if timed_out else statistics.median(runs),
            "runs": runs, "timed_out": timed_out, "timeout_s": timeout_s}


def inputs(checkpoint: str, n: int, seed: int = 0):
    """(tokens, attentions) for a text of n source pieces: the encoder's self-attention, one [1, H, q, k]
    tensor per layer, and run.src_pieces. Loads the checkpoint each call; pass `hm` to `inputs_of` to reuse."""
    from viz_transformer import load_checkpoint
    return inputs_of(load_checkpoint(checkpoint), n, seed)


def inputs_of(hm, n: int, seed: int = 0):
    from benchmarks.texts import text_of
    run = hm.run(text_of(hm.tokenizer, n, seed=seed), max_new_tokens=8,    # encoder attention ignores the target
                 names_filter=lambda name: name.startswith("encoder.") and name.endswith("self_attn.hook_pattern"))
    layers = hm.cfg.n_encoder_layers
    return list(run.src_pieces), [run.cache[f"encoder.{i}.self_attn.hook_pattern"] for i in range(layers)]


def table(rows: list[dict]) -> str:
    out = [f"{'tokens':>6} {'layers x heads':>14} {'svg lines':>10} {'BertViz HTML':>13} {'page loaded':>12} "
           f"{'draw s (median)':>16}  runs"]
    for r in rows:
        s = f">{r['timeout_s']:.0f}" if r["timed_out"] else f"{r['seconds']:.2f}"
        out.append(f"{r['n_tokens']:>6} {r['layers']:>7} x {r['heads']:<4} {r['svg_lines']:>10,} "
                   f"{r['bytes_bertviz_html'] / 1e6:>10.2f} MB {r['bytes_loaded'] / 1e6:>9.2f} MB {s:>16}  "
                   + ", ".join(f"{x:.2f}" for x in r["runs"]))
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint", default="checkpoints/zh-en")
    p.add_argument("--tokens", default="32,128,512")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=60, help="seconds one draw may take (512 pieces: minutes, ~10 GB)")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args()
    if not have_bertviz():
        print("skip: bertviz is not installed (benchmark-only: pip install --no-deps -r requirements-bench.txt)")
        return
    from playwright.sync_api import sync_playwright
    from viz_transformer import load_checkpoint
    hm = load_checkpoint(args.checkpoint)
    rows = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for n in (int(x) for x in args.tokens.split(",")):
            tokens, attentions = inputs_of(hm, n)
            rows.append(measure(browser, tokens, attentions, args.repeat, args.timeout))
            print(table(rows[-1:]).splitlines()[-1] if len(rows) > 1 else table(rows), flush=True)
        browser.close()
    print(f"\nBertViz model_view, {args.checkpoint} encoder self-attention, Chromium headless:\n{table(rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
