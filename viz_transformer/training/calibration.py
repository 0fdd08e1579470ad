"""The confidence thresholds, chosen once per checkpoint on its validation split and written into its
meta.json (`python -m viz_transformer calibrate CHECKPOINT`); what they mean and how they are chosen:
confidence.py's docstring.
"""
from __future__ import annotations

import math
import re
from typing import Optional

import torch

from viz_transformer.training import data as D
from viz_transformer.analysis.confidence import (BAR_BLEU, INPUT_QUANTILE, LM_QUANTILE, MIN_FLAGGED, RARE_BELOW, Confidence, _unbits,
                         batch_scores, piece_stats, verdict)
from viz_transformer.run.decoding import default_new_tokens, greedy_ids


def _bleu_stats(hyps, refs):
    from sacrebleu.metrics import BLEU
    bleu = BLEU()
    return bleu, bleu._extract_corpus_statistics(hyps, [refs])


def corpus_bleu(hyps, refs) -> Optional[float]:
    import sacrebleu
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) if hyps else None


def choose_tau(scores: list[float], hyps: list[str], refs: list[str], bar: float = BAR_BLEU,
               min_n: int = MIN_FLAGGED) -> tuple[float, int]:
    """(tau, how many validation outputs fall below it): the largest mean log-prob such that every
    output below it, together, scores under `bar` corpus BLEU (at least min_n of them); -inf if none."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    bleu, stats = _bleu_stats([hyps[i] for i in order], [refs[i] for i in order])
    acc, best = [0] * len(stats[0]), 0
    for k, s in enumerate(stats, 1):
        acc = [a + x for a, x in zip(acc, s)]
        if k >= min_n and k < len(order) and bleu._compute_score_from_stats(acc).score < bar:
            best = k
    if best == 0:
        return float("-inf"), 0
    lo, hi = scores[order[best - 1]], scores[order[best]]
    return (lo + hi) / 2, best


def _quantile(xs: list[float], q: float) -> float:
    return float(torch.quantile(torch.tensor(xs, dtype=torch.float64), q))


def calibrate(hm, data: Optional[str] = None, limit: Optional[int] = None, log=print) -> dict:
    """The meta.json block for a checkpoint: piece statistics, thresholds, how they were chosen, and
    (translators) the test BLEU of flagged and unflagged outputs. `limit`: the first N items of each split."""
    from viz_transformer.training.evaluation import translation_splits
    tok, cfg, meta = hm.tokenizer, hm.cfg, hm.meta
    n_new = default_new_tokens(cfg)
    if not cfg.is_translator:
        return _calibrate_lm(hm, data, limit, log)
    train, val, test = translation_splits(meta, data)
    val, _ = D.unseen_sources(val, train)
    test, _ = D.unseen_sources(test, train)
    val, test = val[:limit] if limit else val, test[:limit] if limit else test
    pieces = piece_stats(tok, sorted({s for s, _ in train}))
    common, seen = _unbits(pieces["common"]), _unbits(pieces["seen"])
    by_split = {}
    for name, pairs in (("val", val), ("test", test)):
        texts = [s for s, _ in pairs]
        outs = greedy_ids(hm.model, tok, texts, n_new)
        scores = batch_scores(hm, texts, outs, n_new)
        by_split[name] = ([tok.decode(o) for o in outs], [t for _, t in pairs], scores)
        log(f"{hm.name}: {name} split, {len(pairs)} outputs scored")
    hyps, refs, scores = by_split["val"]
    tau, n_low = choose_tau([s[0] for s in scores], hyps, refs)
    rare = [sum(i not in common for i in s[2]) for s in scores]
    th = {"mean_logprob": round(tau, 4), "rare_pieces": math.floor(_quantile(rare, INPUT_QUANTILE)),
          "unseen_pieces": max(sum(i not in seen for i in s[2]) for s in scores),
          "longest_input": pieces["longest_input"]}
    report = {}
    for name, (hyps, refs, scores) in by_split.items():
        flags = [bool(verdict(Confidence(s[0], 0, 1, len(s[2]), sum(i not in common for i in s[2]),
                                         sum(i not in seen for i in s[2])), th)) for s in scores]
        f = [i for i, x in enumerate(flags) if x]
        u = [i for i, x in enumerate(flags) if not x]
        report[name] = {"flagged": {"bleu": corpus_bleu([hyps[i] for i in f], [refs[i] for i in f]), "n": len(f)},
                        "unflagged": {"bleu": corpus_bleu([hyps[i] for i in u], [refs[i] for i in u]), "n": len(u)},
                        "all": {"bleu": corpus_bleu(hyps, refs), "n": len(hyps)}}
    how = (f"greedy outputs of {len(val)} validation pairs whose source is not a training source: mean_logprob is "
           f"the largest mean log-probability such that the {n_low} outputs below it together score under "
           f"{BAR_BLEU:g} corpus BLEU; rare_pieces is the {INPUT_QUANTILE:.0%} quantile of the validation sources' "
           f"number of pieces seen fewer than {RARE_BELOW} times in training sources, unseen_pieces the most "
           f"never-seen pieces in a validation source; longest_input is the longest "
           f"training source in pieces. An output is flagged when any threshold is crossed.")
    return {"thresholds": th, "how": how, "command": _command(hm, limit), "pieces": pieces, **report}


def first_sentence(story: str) -> str:
    """A story's first sentence (up to its first . ! or ?), or its first 80 characters: an LM's prompt."""
    m = re.match(r"(.+?[.!?])(\s|$)", story, re.S)
    return (m.group(1) if m else story[:80]).strip()


def _calibrate_lm(hm, data, limit, log) -> dict:
    """An LM's thresholds: the validation stories' first sentences as prompts (see the module doc)."""
    meta, tok, cfg = hm.meta, hm.tokenizer, hm.cfg
    from viz_transformer.training.evaluation import story_splits
    train, val, _ = story_splits(meta, data)
    val = val[:limit] if limit else val
    pieces = piece_stats(tok, train)
    n_new = default_new_tokens(cfg)
    prompts = [first_sentence(s) for s in val]
    outs = greedy_ids(hm.model, tok, prompts, n_new)
    scores = batch_scores(hm, prompts, outs, n_new, batch_size=16)
    log(f"{hm.name}: {len(prompts)} validation prompts continued and scored")
    th = {"mean_logprob": round(_quantile([s[0] for s in scores], 1 - LM_QUANTILE), 4),
          "prompt_ppl": round(_quantile([s[1] for s in scores], LM_QUANTILE), 2)}
    flagged = sum(bool(verdict(Confidence(s[0], 0, 1, 1, 0, 0, s[1]), th)) for s in scores)
    how = (f"the first sentence of each of {len(prompts)} validation stories as a prompt, continued greedily: "
           f"prompt_ppl is the {LM_QUANTILE:.0%} quantile of those prompts' perplexity, mean_logprob the "
           f"{1 - LM_QUANTILE:.0%} quantile of their continuations' mean log-probability. An output is "
           f"flagged when either is crossed.")
    return {"thresholds": th, "how": how, "command": _command(hm, limit), "pieces": pieces,
            "val": {"flagged": {"n": flagged}, "all": {"n": len(prompts)}}}


def _command(hm, limit) -> str:
    return f"python -m viz_transformer calibrate checkpoints/{hm.name}" + (f" --limit {limit}" if limit else "")
