"""The page goal on a t5-small-sized random folder: the attention and positional pages at 128 pieces, from
the click in the sidebar to pixels (goal ≤ 1.5 s). The folder: T5ForConditionalGeneration with t5-small's
configuration (6 + 6 layers, 8 heads, d_model 512, d_kv 64, FFN 2048, 32 buckets, vocabulary 32,128: 60M
parameters, ReLU, the output tied to the embedding) saved by transformers, with a SentencePiece Unigram tokenizer
learned on the story corpus (T5's layout: <pad>, </s>, <unk>, then 100 sentinels); built once under --work.

    python -m benchmarks.bench_t5                                  # attention and positional, three walks
    python -m benchmarks.bench_t5 --pause-training --repeat 3      # SIGSTOP the background training meanwhile

The walk is benchmarks.bench_pages_hf's: one server, one headless Chromium, the text submitted on the overview,
then each page opened once from the sidebar (time to pixels as benchmarks/pixels.py measures it). Needs
transformers (requirements-dev.txt).
"""
from __future__ import annotations

import argparse
import signal
import statistics
import sys
from pathlib import Path

from benchmarks.bench_pages_hf import ROOT, PausedTraining, walk
from benchmarks.texts import sentences, text_of

NAME = "t5-small-random"
GOAL_S = 1.5


def t5_root(work: Path) -> Path:
    """The checkpoint root holding the t5-small-sized folder (built once, about 240 MB)."""
    root = work / "t5-root"
    folder = root / NAME
    if (folder / "model.safetensors").is_file():
        return root
    import sentencepiece as spm
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer
    folder.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences("en")[:20000]), model_prefix=str(folder / "spiece"),
                                   vocab_size=8000, hard_vocab_limit=False, model_type="unigram", pad_id=0, eos_id=1,
                                   unk_id=2, bos_id=-1, minloglevel=2)
    (folder / "spiece.vocab").unlink()
    T5Tokenizer.from_pretrained(folder).save_pretrained(folder)
    (folder / "spiece.model").unlink()                     # the folder's tokenizer is its tokenizer.json
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(vocab_size=32128, decoder_start_token_id=0))   # t5-small's shape
    model.save_pretrained(folder, safe_serialization=True)
    return root


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", default="/tmp/bench_t5")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=None,
                   help="set the server's OMP_NUM_THREADS (default: unset, the app's own thread policy, as the README's "
                        "command runs it)")
    p.add_argument("--pages", default="attention,positional", help="comma-separated page names (registry)")
    p.add_argument("--repeat", type=int, default=3, help="walks, each with a fresh server")
    p.add_argument("--pause-training", action="store_true", help="SIGSTOP `viz_transformer train` while timing")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))       # so the training is continued on a kill too
    from playwright.sync_api import sync_playwright

    from benchmarks.pixels import launch
    from benchmarks.stclient import Server
    from viz_transformer import load_checkpoint
    root = t5_root(Path(a.work))
    hm = load_checkpoint(root / NAME)
    n_params = sum(t.numel() for t in {id(t): t for t in hm.model.parameters()}.values())
    text = text_of(hm.tokenizer, a.tokens + 1, seed=a.tokens, lang="en")
    print(f"{NAME}: {n_params / 1e6:.1f}M parameters, text of {len(hm.tokenizer.encode(text))} pieces")
    only = [x for x in a.pages.split(",") if x]
    times: dict[str, list[float]] = {}
    with PausedTraining(a.pause_training):
        for _ in range(a.repeat):
            with Server(ROOT, root, log="/tmp/bench_t5_server.log", env={} if a.threads is None else {"OMP_NUM_THREADS": str(a.threads)}) as server, \
                    sync_playwright() as pw:
                browser = launch(pw)
                rows, _ = walk(browser, server, text, only, goal=GOAL_S)
                browser.close()
            for r in rows[1:]:
                times.setdefault(r["page"], []).append(r["seconds"])
    print("\n| page | click to pixels, each walk | median | goal |\n|---|---|---|---|")
    for page, ts in times.items():
        med = statistics.median(ts)
        print(f"| {page} | {' / '.join(f'{t:.2f}' for t in ts)} s | {med:.2f} s | {'≤' if med <= GOAL_S else '>'} "
              f"{GOAL_S} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
