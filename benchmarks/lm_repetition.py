"""How much a story model repeats itself (greedy decoding of a model this small loops).
The first sentence of each validation story (the split rebuilt from meta.json, as `evaluate` and `calibrate`
do) is continued greedily for 96 pieces. Prints, per checkpoint, the validation perplexity, the share of each
continuation's word 4-grams that already occurred earlier in it (mean over stories), and how many
continuations write one sentence twice. Give two checkpoints to compare them in one run.

    python -m benchmarks.lm_repetition checkpoints/en-stories
    python -m benchmarks.lm_repetition ../old-main/checkpoints/en-stories checkpoints/en-stories
"""
from __future__ import annotations

import argparse
import json
import re

import torch


from viz_transformer import load_checkpoint
from viz_transformer.run.decoding import greedy_batch
from viz_transformer.training.calibration import first_sentence
from viz_transformer.training.evaluation import evaluate_lm, story_splits


def repeated_share(text: str, n: int = 4) -> float:
    """The share of the text's word n-grams that already occurred earlier in it."""
    words = text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    seen, again = set(), 0
    for g in grams:
        again += g in seen
        seen.add(g)
    return again / len(grams) if grams else 0.0


def writes_a_sentence_twice(text: str) -> bool:
    sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 3]
    return len(sents) != len(set(sents))


def measure(path: str, new_tokens: int = 96) -> dict:
    hm = load_checkpoint(path)
    _, val, _ = story_splits(hm.meta)
    outs = greedy_batch(hm.model, hm.tokenizer, [first_sentence(s) for s in val], max_new_tokens=new_tokens)
    return {"checkpoint": path, "val_perplexity": evaluate_lm(hm)["perplexity"], "stories": len(outs),
            "repeated_4grams": round(sum(map(repeated_share, outs)) / len(outs), 3),
            "sentence_twice": sum(map(writes_a_sentence_twice, outs))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", nargs="+")
    p.add_argument("--new-tokens", type=int, default=96)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = [measure(c, args.new_tokens) for c in args.checkpoint]
    for r in rows:
        print(json.dumps(r))
    if len(rows) == 2:
        a, b = rows
        print(f"perplexity ×{b['val_perplexity'] / a['val_perplexity']:.2f}, repeated 4-grams "
              f"×{b['repeated_4grams'] / max(a['repeated_4grams'], 1e-9):.2f}, sentence twice "
              f"{a['sentence_twice']} → {b['sentence_twice']} of {b['stories']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
