"""The app's benchmarks in one run: time to pixels of every page, BertViz side by side, bytes sent, the
server's memory after many texts, capture overhead, KV cache and cold start. Prints a table of ratios and
goals and writes every number as JSON.

    python -m benchmarks.bench_app                              # everything (the longest run)
    python -m benchmarks.bench_app --quick                      # 128 tokens, 10 texts for memory (a quick look)
    python -m benchmarks.bench_app --only pixels peer --tokens 128 --json /tmp/b.json

Parts (each also runs alone): pixels.py (pages), peer_bertviz.py (BertViz, needs requirements-bench.txt),
bench_memory.py (server RSS), bench_core.py (capture, KV cache), cold_start.py.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARTS = ("pixels", "peer", "memory", "core", "cold")
GOALS = {"page_128_s": 1.0, "page_512_s": 2.0, "vs_bertviz_time": 12.0, "vs_bertviz_bytes": 50.0, "rss_mib": 600,
         "capture_ratio": 1.15, "kv_speedup": 3.0, "cold_start_s": 5.0}


def machine() -> str:
    mem = next((int(line.split()[1]) // 2**20 for line in open("/proc/meminfo") if line.startswith("MemTotal")), 0)
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem} GiB, Linux {platform.release()}, Python " \
           f"{platform.python_version()}, headless Chromium (Debian)"


def run_pixels(browser, a, tok, root: Path = ROOT, checkpoints=None) -> dict:
    from benchmarks import pixels
    from benchmarks.stclient import Server
    with Server(root, checkpoints or a.checkpoints, log="/tmp/bench_app_server.log") as server:
        rows = pixels.measure(browser, server.url, tok, a.tokens, repeat=a.repeat)
        return {"rows": rows, "server_rss_mib": server.rss_mib(), "table": pixels.table(rows), "root": str(root)}


def before_after(res: dict) -> list[str]:
    """Each page's warm time to pixels now vs the --before checkout, side by side (same harness, same run)."""
    now = {(r["page"], r["tokens"]): r for r in res["pixels"]["rows"]}
    old = {(r["page"], r["tokens"]): r for r in res["pixels_before"]["rows"]}
    tokens = sorted({k for _, k in now})
    lines = ["| page | " + " | ".join(f"{n} tokens: before → now" for n in tokens) + " |",
             "|---" * (len(tokens) + 1) + "|"]
    for page in dict.fromkeys(p for p, _ in now):
        if " › " in page:
            continue
        cells = []
        for n in tokens:
            a, b = old.get((page, n)), now.get((page, n))
            cells.append(f"{a['seconds']:.2f} → {b['seconds']:.2f} s ({a['seconds'] / b['seconds']:.1f}×)" if a and b
                         else (f"{b['seconds']:.2f} s" if b else ""))
        lines.append(f"| {page} | " + " | ".join(cells) + " |")
    return lines


def run_peer(browser, a, hm) -> dict:
    from benchmarks import peer_bertviz
    if not peer_bertviz.have_bertviz():
        return {"skipped": "bertviz is not installed (pip install -r requirements-bench.txt)"}
    rows = [peer_bertviz.measure(browser, *peer_bertviz.inputs_of(hm, n, seed=n), repeat=a.repeat, timeout_s=60)
            for n in a.tokens]
    return {"rows": rows, "table": peer_bertviz.table(rows)}


def summary(res: dict, tokens: list[int]) -> list[str]:
    """One line per goal: the measured value, the goal, met or missed; ratios first."""
    out = []

    def line(what: str, value: str, goal: str, met: bool) -> None:
        out.append(f"{'met   ' if met else 'MISSED'}  {what}: {value} (goal {goal})")

    rows = res.get("pixels", {}).get("rows", [])
    pages = {(r["page"], r["tokens"]): r for r in rows if not r["page"].startswith("new text")}
    peer = {r["n_tokens"]: r for r in res.get("peer", {}).get("rows", [])}
    for n in tokens:
        att = pages.get(("Attention: heads and layers", n))
        bv = next((r for k, r in peer.items() if abs(k - n) <= 2), None)
        if att and bv:
            if bv["seconds"]:
                ratio = bv["seconds"] / att["seconds"]
                line(f"attention page vs BertViz model_view at {n} tokens, time", f"{ratio:.1f}x faster "
                     f"({att['seconds']:.2f} s vs {bv['seconds']:.2f} s)", f">= {GOALS['vs_bertviz_time']:.0f}x "
                     "at 128", n != 128 or ratio >= GOALS["vs_bertviz_time"])
            else:
                line(f"attention page vs BertViz at {n} tokens, time", f"{att['seconds']:.2f} s vs BertViz > "
                     f"{bv['timeout_s']:.0f} s (gave up)", "faster", True)
            b = bv["bytes_loaded"] / max(att["bytes"], 1)
            line(f"attention page vs BertViz at {n} tokens, bytes", f"{b:.0f}x fewer ({att['bytes'] / 1e6:.2f} MB vs "
                 f"{bv['bytes_loaded'] / 1e6:.1f} MB)", f">= {GOALS['vs_bertviz_bytes']:.0f}x", b >= GOALS["vs_bertviz_bytes"])
    for n, goal in ((128, GOALS["page_128_s"]), (512, GOALS["page_512_s"])):
        at_n = [r for (p, k), r in pages.items() if k == n]
        if at_n:
            worst = max(at_n, key=lambda r: r["seconds"])
            over = [f"{r['page']} {r['seconds']:.2f} s" for r in at_n if r["seconds"] > goal]
            line(f"slowest page at {n} tokens", f"{worst['page']} {worst['seconds']:.2f} s"
                 + (f"; over: {', '.join(over)}" if over else ""), f"<= {goal:.1f} s", not over)
    mem = res.get("memory", {})
    if "rss_mib" in mem:
        last = list(mem["rss_mib"].items())[-1]
        line(f"server RSS after {last[0]} of {mem['pieces']} pieces on every page", f"{last[1]:.0f} MiB, "
             f"{mem['growth_after_n_mib']:+.0f} MiB over the last {mem['more']}", f"<= {GOALS['rss_mib']} MiB, flat",
             mem["peak_mib"] <= GOALS["rss_mib"] and not mem["errors"])
    core = res.get("core", {})
    for c in core.get("capture", []):
        line(f"capture (every hook) vs plain forward, {c['source_pieces']} pieces", f"{c['ratio']:.2f}x",
             f"<= {GOALS['capture_ratio']}x", c["ratio"] <= GOALS["capture_ratio"])
    for k in core.get("kv_cache", []):
        line(f"KV cache vs recompute, {k['new_tokens']} new tokens, {k['source_pieces']} pieces",
             f"{k['speedup']:.1f}x, {'same' if k['same_tokens'] else 'DIFFERENT'} tokens",
             f">= {GOALS['kv_speedup']:.0f}x", k["speedup"] >= GOALS["kv_speedup"] and k["same_tokens"])
    cold = res.get("cold", {})
    if "drawn_s" in cold:
        line("cold start, process to first page drawn", f"{cold['drawn_s']:.2f} s", f"<= {GOALS['cold_start_s']:.0f} s",
             cold["drawn_s"] <= GOALS["cold_start_s"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoints", default=str(ROOT / "checkpoints"))
    p.add_argument("--tokens", default="32,128,512")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--texts", type=int, default=50, help="distinct 512-piece texts for the memory part")
    p.add_argument("--only", nargs="*", choices=PARTS)
    p.add_argument("--before", help="another checkout (e.g. a worktree of the previous main) whose pages are "
                                    "timed by the same harness in the same run")
    p.add_argument("--quick", action="store_true", help="128 tokens, 2 repeats, 10 texts")
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "bench_app.json"))
    a = p.parse_args(argv)
    if a.quick:
        a.tokens, a.repeat, a.texts = "128", 2, 10
    a.tokens = [int(x) for x in a.tokens.split(",")]
    parts = a.only or PARTS
    from playwright.sync_api import sync_playwright

    from benchmarks import pixels
    from viz_transformer import load_checkpoint
    hm = load_checkpoint(Path(a.checkpoints) / "zh-en")
    res: dict = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M"), "tokens": a.tokens,
                 "command": "python -m benchmarks.bench_app " + " ".join(argv if argv is not None else sys.argv[1:])}
    with sync_playwright() as pw:
        browser = pixels.launch(pw)
        if "pixels" in parts:
            res["pixels"] = run_pixels(browser, a, hm.tokenizer)
            print(res["pixels"]["table"], flush=True)
            if a.before:
                res["pixels_before"] = run_pixels(browser, a, hm.tokenizer, Path(a.before),
                                                  Path(a.before) / "checkpoints")
                res["before_after"] = before_after(res)
                print("\n".join(res["before_after"]), flush=True)
        if "peer" in parts:
            res["peer"] = run_peer(browser, a, hm)
            print(res["peer"].get("table", res["peer"].get("skipped")), flush=True)
        if "cold" in parts:
            from benchmarks import cold_start
            res["cold"] = cold_start.measure(browser, repeat=a.repeat, checkpoints=a.checkpoints)
            print(cold_start.table(res["cold"]), flush=True)
        browser.close()
    if "core" in parts:
        from benchmarks import bench_core
        res["core"] = bench_core.measure(str(Path(a.checkpoints) / "zh-en"))
        print(bench_core.table(res["core"]), flush=True)
    if "memory" in parts:
        from benchmarks import bench_memory
        res["memory"] = bench_memory.measure(n_texts=a.texts, more=max(5, a.texts // 2), checkpoints=a.checkpoints)
        print(bench_memory.table(res["memory"]), flush=True)
    res["summary"] = summary(res, a.tokens)
    print(f"\n{res['machine']}\n" + "\n".join(res["summary"]))
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
