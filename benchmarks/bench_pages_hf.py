"""The page goal on a Hugging Face-sized model: every page's first view at 128 tokens, from the click in
the sidebar to pixels (goal ≤ 2 s; at 512 tokens ≤ 1.5 s, at 2,048 ≤ 3 s), on a random model with Qwen2.5-0.5B's configuration (24 layers, 14 query
heads, 2 KV heads, d_model 896, FFN 4864, vocabulary 151,936) imported from a Hugging Face qwen2 folder;
and the server's RSS with it loaded, after the walk, and its peak (at 2,048: ≤ 6 GB, ≤ 4 GB after).

    python -m benchmarks.bench_pages_hf                              # builds the folder once (about 2 GB)
    python -m benchmarks.bench_pages_hf --pages attention,decoding --json benchmarks/results/bench_pages_hf.json
    python -m benchmarks.bench_pages_hf --pause-training             # pause the background training meanwhile
    python -m benchmarks.bench_pages_hf --tokens 2048 --pages attention,rollout  # a long text (goal ≤ 3 s)
    python -m benchmarks.bench_pages_hf --app /tmp/before            # another checkout's app (git archive main)
    python -m benchmarks.bench_pages_hf --model bert --pages attention  # a BERT-base-sized folder (goal ≤ 1.5 s)
    python -m benchmarks.bench_pages_hf --model nllb --pages attention  # an NLLB-600M-sized folder (goal ≤ 1.5 s)

One server (VIZ_CHECKPOINTS = the folder's root, OMP_NUM_THREADS = --threads), one headless Chromium: the text is
submitted on the overview ("new text": the model's run, its continuation included), then every page of
views/shell/registry.PAGES is opened once from the sidebar, in sidebar order (the first view: what it caches
is computed then); the overview last, from the page before it. Time to pixels is measured as in
benchmarks/pixels.py (script state notRunning, no skeleton, every plotly chart drawn, two frames painted).
Needs transformers (requirements-dev.txt).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.bench_hf import make_folder
from benchmarks.pixels import Traffic, launch, measure_action, nav_pages, settle
from benchmarks.stclient import Server
from benchmarks.texts import sentences, text_of

VOCAB = 151936
GOAL_S = 2.0
GOALS = {"qwen2": GOAL_S, "bert": 1.5, "nllb": 1.5}   # --model: its page goal (s) at 128 tokens
LONG_GOALS = {512: 1.5, 2048: 3.0}              # qwen2 from this many tokens on: the long-text page goals
PAUSE_FILE = Path("/root/viz-runs/PAUSE")       # the training watcher stops every run within 5 s while it exists


def goal_for(model: str, tokens: int) -> float:
    """The page goal for a walk: the model's own, or the long-text goal of the longest length ≤ `tokens`."""
    longs = [n for n in LONG_GOALS if n <= tokens and model == "qwen2"]
    return LONG_GOALS[max(longs)] if longs else GOALS[model]


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM) in MiB; NaN where /proc has none."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pad_tokenizer(folder: Path, vocab: int = VOCAB, learned: int = 4000) -> None:
    """A byte-level BPE learned on the story corpus (`learned` tokens), its vocabulary padded with unreachable
    tokens up to the model's, so that every id the random model generates decodes to a piece."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(sentences("en")[:20000], trainers.BpeTrainer(
        vocab_size=learned, special_tokens=["<s>", "</s>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    spec = json.loads(tok.to_str())
    words = spec["model"]["vocab"]
    for i in range(len(words), vocab):
        words[f"x{i}"] = i                            # never produced by the merges; decodes as "x<id>"
    raw = Tokenizer.from_str(json.dumps(spec))
    PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>").save_pretrained(folder)


def hf_root(work: Path) -> Path:
    """The checkpoint root holding the model's folder (built once: the model by bench_hf, then the tokenizer)."""
    root = work / "root"
    folder = make_folder(root)
    if len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]) < VOCAB:
        pad_tokenizer(folder)
    return root


class PausedTraining:
    """Pause the background training (`viz_transformer train`) while timing and continue it afterwards, always:
    through the watcher's PAUSE file where its folder exists (a watcher would undo a SIGSTOP; a file that was
    there already is left there), else SIGSTOP / SIGCONT."""

    def __init__(self, enabled: bool):
        self.pids, self.file = [], enabled and PAUSE_FILE.parent.is_dir() and not PAUSE_FILE.exists()
        if enabled and not PAUSE_FILE.parent.is_dir():
            out = subprocess.run(["pgrep", "-f", "viz_transformer train"], capture_output=True, text=True).stdout
            self.pids = [int(p) for p in out.split()]

    def __enter__(self):
        if self.file:
            PAUSE_FILE.touch()
        for pid in self.pids:
            os.kill(pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        if self.file:
            PAUSE_FILE.unlink(missing_ok=True)
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def walk(browser, server: Server, text: str, only: list[str], log=print, goal: float = GOAL_S) -> tuple[list[dict], dict]:
    from viz_explorer.kit.registry import PAGES
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    traffic = Traffic(page)
    page.goto(server.url)
    settle(page, 1_800_000)
    links = nav_pages(page)
    assert len(links) == len(PAGES), (len(links), len(PAGES))
    rows, rss = [], {"start_mib": round(server.rss_mib())}
    cpu = server.cpu_seconds()
    r = measure_action(page, traffic, "submit", text, timeout_ms=1_800_000)
    r["cpu_seconds"], cpu = server.cpu_seconds() - cpu, server.cpu_seconds()
    rss["loaded_mib"] = round(server.rss_mib())
    rows.append({"page": "new text (overview)", **r})
    log(f"{'new text (overview)':28s} {r['seconds']:6.2f} s   server CPU {r['cpu_seconds']:6.2f} s  server RSS {rss['loaded_mib']} MiB")
    order = [i for i in range(1, len(PAGES)) if not only or PAGES[i].name in only]
    order += [0] if not only or PAGES[0].name in only else []
    for i in order:
        r = measure_action(page, traffic, "click", links[i][1], timeout_ms=1_800_000)
        r["cpu_seconds"], cpu = server.cpu_seconds() - cpu, server.cpu_seconds()
        rows.append({"page": PAGES[i].name, **r})
        flag = "" if r["seconds"] <= goal else "  > goal"
        log(f"{PAGES[i].name:28s} {r['seconds']:6.2f} s   run ends {r['script_seconds']:5.2f} s  "
            f"server CPU {r['cpu_seconds']:6.2f} s  {r['bytes'] / 1e6:6.2f} MB  {r['charts']} charts" + (f"  {r['exceptions']} EXCEPTIONS" if r["exceptions"]
                                                                   else "") + flag)
    rss["after_walk_mib"] = round(server.rss_mib())
    rss["peak_mib"] = round(peak_rss_mib(server.proc.pid))
    page.close()
    return rows, rss


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", default="/tmp/bench_pages_hf")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=1,
                   help="the server's OMP_NUM_THREADS (1, as deploy/serve.sh: on a busy 2-core machine 2 threads "
                        "spin-wait and cost about 4× the CPU)")
    p.add_argument("--pages", default="", help="comma-separated page names (registry), default every page")
    p.add_argument("--pause-training", action="store_true",
                   help=f"pause `viz_transformer train` while timing ({PAUSE_FILE} if its folder exists, else SIGSTOP)")
    p.add_argument("--app", default=str(ROOT), help="the checkout whose app is timed (e.g. a `git archive` of main)")
    p.add_argument("--json", help="write the rows and RSS here")
    p.add_argument("--model", choices=list(GOALS), default="qwen2",
                   help="qwen2: Qwen2.5-0.5B-sized; bert: BERT-base-sized, BertForMaskedLM; nllb: NLLB-600M-sized "
                        "m2m_100 (a Chinese text, translated into English)")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))       # so the training is continued on a kill too
    from playwright.sync_api import sync_playwright

    from viz_transformer import load_checkpoint
    if a.model == "bert":
        from benchmarks.bert_base import NAME, bert_root
        root, name = bert_root(Path(a.work)), NAME
    elif a.model == "nllb":
        from benchmarks.nllb_base import NAME, nllb_root
        root, name = nllb_root(Path(a.work)), NAME
    else:
        root, name = hf_root(Path(a.work)), "qwen2.5-0.5b-random"
    goal = goal_for(a.model, a.tokens)
    text = text_of(load_checkpoint(root / name).tokenizer, a.tokens + 1, seed=a.tokens,
                   lang="zh" if a.model == "nllb" else "en")
    only = [x for x in a.pages.split(",") if x]
    with PausedTraining(a.pause_training), \
            Server(Path(a.app), root, log="/tmp/bench_pages_hf_server.log", env={"OMP_NUM_THREADS": str(a.threads)}) as server, \
            sync_playwright() as pw:
        browser = launch(pw)
        rows, rss = walk(browser, server, text, only, goal=goal)
        browser.close()
    print("\n| page | first view | run ends | server CPU | MB sent | charts |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['page']} | {r['seconds']:.2f} s | {r['script_seconds']:.2f} s | {r['cpu_seconds']:.2f} s | {r['bytes'] / 1e6:.2f} | {r['charts']} |")
    slow = [r["page"] for r in rows[1:] if r["seconds"] > goal]
    print(f"\nserver RSS: {rss['start_mib']} MiB at start, {rss['loaded_mib']} MiB with the model loaded and the text "
          f"run, {rss['after_walk_mib']} MiB after the walk, peak {rss['peak_mib']} MiB; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; pages over {goal} s: {', '.join(slow) or 'none'}")
    if a.json:
        Path(a.json).write_text(json.dumps({"model": a.model, "tokens": a.tokens, "threads": a.threads, "goal_s": goal,
                                            "rows": rows, "rss": rss},
                                           indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
