"""The Attention vs attribution page's first view at 32 and 128 pieces on zh-en, click to pixels
(goal ≤ 2 s at 128); the "how often" pass over the 200 built-in held-out sentences (its time, and τ with occlusion
per method and per layer: docs/attribution.md); and what importing Captum (with matplotlib) costs a process.

    python -m benchmarks.bench_attribution                                  # all three parts, zh-en
    python -m benchmarks.bench_attribution --parts corpus --models zh-en,zh-en-decoder,en-stories --sentences 200
    python -m benchmarks.bench_attribution --parts page --pause-training    # SIGSTOP the background training meanwhile

The page is timed as benchmarks/pixels.py times every page (one server, headless Chromium, a new text submitted on
the overview, then the page opened from the sidebar `--repeat` times: the first visit computes, later ones reuse the
memo). The corpus pass is analysis.attribution.corpus_taus with every method and per_layer=True, in this process,
--workers sentences at once on threads (default the app's, viz_explorer/server/threads.cores()).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from viz_explorer.server.threads import cores

ROOT = Path(__file__).resolve().parent.parent
PAGE = "Attention vs attribution"
GOAL_S = 2.0

_IMPORT = ("import resource, time; from benchmarks.procfs import rss_mib; import torch; r0 = rss_mib(); t = time.time(); "
           "import captum.attr; print(round(time.time() - t, 3), round(rss_mib() - r0, 1))")


def import_cost(n: int = 3) -> dict:
    """Seconds and RSS (MB) that `import captum.attr` adds to a process that has torch already, median of n."""
    runs = []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", _IMPORT], cwd=ROOT, capture_output=True, text=True, check=True)
        runs.append([float(x) for x in out.stdout.split()])
    runs.sort()
    s, mb = runs[len(runs) // 2]
    return {"import_seconds": s, "rss_mib": mb, "runs": runs}


def page_times(tokens, repeat: int) -> list[dict]:
    from playwright.sync_api import sync_playwright
    from benchmarks.pixels import launch, measure
    from benchmarks.stclient import Server
    from viz_transformer.core.checkpoint import load_tokenizer, read_config
    folder = ROOT / "checkpoints" / "zh-en"
    tok = load_tokenizer(folder, read_config(folder))
    with Server(ROOT, ROOT / "checkpoints", log="/tmp/bench_attribution_server.log") as server, sync_playwright() as pw:
        browser = launch(pw)
        rows = measure(browser, server.url, tok, tokens, [PAGE], repeat)
        browser.close()
    return [r for r in rows if r["page"] == PAGE]


def corpus(name: str, n: int, max_steps=None, save=None, chunk: int = 10, workers: int = 1) -> dict:
    """τ over the first n built-in sentences, `chunk` sentences at a time; save(result so far) after each chunk."""
    import pandas as pd
    import torch
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import attribution as AA
    from viz_transformer.training import corpora
    hm = load_checkpoint(ROOT / "checkpoints" / name)
    texts = corpora.load("zh" if hm.cfg.is_translator else "en")[:n]
    t, parts = time.perf_counter(), []
    for a in range(0, len(texts), chunk):
        part = AA.corpus_taus(hm, texts[a:a + chunk], per_layer=True, max_steps=max_steps, workers=workers)
        parts.append(part.assign(sentence=part["sentence"] + a))
        df = pd.concat(parts, ignore_index=True)
        summary = AA.tau_summary(df)
        layers = (df[df["layer"] >= 0].dropna(subset=["tau"]).groupby(["method", "layer"])["tau"]
                  .agg(steps="size", median="median", above_half=lambda x: float((x > 0.5).mean())))
        out = {"model": name, "sentences": min(a + chunk, len(texts)), "of": len(texts), "max_steps": max_steps,
               "threads": torch.get_num_threads(), "workers": workers, "steps": len(df[["sentence", "step"]].drop_duplicates()),
               "seconds": round(time.perf_counter() - t, 1), "summary": summary.round(3).reset_index().to_dict("records"),
               "per_layer": layers.round(3).reset_index().to_dict("records")}
        print(f"  {name}: {out['sentences']}/{len(texts)} sentences, {out['seconds']:.0f} s", flush=True)
        if save is not None:
            save(out)
    return out


def _print_corpus(r: dict) -> None:
    print(f"\n{r['model']}: {r['sentences']} of {r['of']} sentences, {r['steps']} output steps"
          + (f" (the first {r['max_steps']} of each)" if r["max_steps"] else "")
          + f", {r['seconds']:.1f} s ({r['seconds'] / max(r['steps'], 1):.2f} s a step, {r['threads']} torch thread, "
            f"{r.get('workers', 1)} sentence(s) at once)")
    print(f"  {'method':22s} {'steps':>6s} {'median τ':>9s} {'mean τ':>7s} {'τ > 0.5':>8s}")
    for s in r["summary"]:
        print(f"  {s['method']:22s} {s['steps']:6d} {s['median']:9.2f} {s['mean']:7.2f} {s['above_half']:8.0%}")
    for s in r["per_layer"]:
        print(f"  {s['method']:12s} layer {s['layer']:<2d} {s['steps']:6d} {s['median']:9.2f} {'':7s} "
              f"{s['above_half']:8.0%}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="import,page,corpus")
    p.add_argument("--tokens", default="32,128")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--models", default="zh-en")
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--max-steps", help="per model, the output steps read per sentence: 'en-stories=8' (default all)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for the corpus pass (the app's: one, "
                                                           "viz_explorer/server/threads.py)")
    p.add_argument("--chunk", type=int, default=10, help="sentences between saves of the result so far (0: all at "
                   "once, as the app runs them)")
    p.add_argument("--workers", type=int, default=cores(),
                   help="sentences at once, each on a thread (the app's: viz_explorer/server/threads.cores())")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--pause-training", action="store_true", help="SIGSTOP `viz_transformer train` processes meanwhile")
    a = p.parse_args(argv)
    parts, out = a.parts.split(","), {}
    paused = []
    if a.pause_training:
        found = subprocess.run(["pgrep", "-f", "viz_transforme[r] train"], capture_output=True, text=True).stdout.split()
        paused = [int(x) for x in found]
        for pid in paused:
            os.kill(pid, signal.SIGSTOP)
    try:
        print(f"load average {os.getloadavg()[0]:.1f}; training paused: {len(paused)} processes")
        if "import" in parts:
            out["import"] = import_cost()
            print(f"import captum.attr: {out['import']['import_seconds']:.2f} s, +{out['import']['rss_mib']:.0f} MiB RSS "
                  f"(median of 3 fresh processes with torch loaded)")
        if "page" in parts:
            out["page"] = page_times([int(x) for x in a.tokens.split(",")], a.repeat)
            for r in out["page"]:
                print(f"{PAGE} at {r['tokens']:>4} pieces: first view {r['first_seconds']:.2f} s (goal ≤ {GOAL_S} s at 128), "
                      f"again {r['seconds']:.2f} s; runs {r['runs']}")
        if "corpus" in parts:
            import torch
            torch.set_num_threads(a.threads)
            caps = dict(x.split("=") for x in a.max_steps.split(",")) if a.max_steps else {}
            out["corpus"] = []
            def save(r):                             # what is done so far, should the pass run past the session
                if a.json:
                    Path(a.json).write_text(json.dumps({**out, "corpus": out["corpus"] + [r]}, indent=1, default=str))
            for name in a.models.split(","):
                out["corpus"].append(corpus(name, a.sentences, int(caps[name]) if name in caps else None, save,
                                             a.chunk or a.sentences, a.workers))
                _print_corpus(out["corpus"][-1])
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        for pid in paused:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
