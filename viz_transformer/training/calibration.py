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
from viz_transformer.analysis.confidence import (BAD_CHRF, BAR_BLEU, CONFIDENCE_Z, FEATURES, GOAL_FALSE_ALARMS, GOOD_CHRF,
                                                INPUT_QUANTILE, LM_QUANTILE, MIN_FLAGGED, RARE_BELOW, REPEAT_N,
                                                Confidence, batch_scores, byte_characters, classifier_score,
                                                features, piece_stats, repeated_ngram, unbits, verdict)
from viz_transformer.run.decoding import default_new_tokens, greedy_ids


def _bleu_stats(hyps, refs) -> list[list[int]]:
    """Each pair's BLEU sufficient statistics [hyp length, ref length, matches 1-4, totals 1-4], read from
    sacrebleu's public score of the pair alone (their sums are the corpus's)."""
    from sacrebleu.metrics import BLEU
    bleu = BLEU()
    return [[s.sys_len, s.ref_len, *s.counts, *s.totals] for s in (bleu.corpus_score([h], [[r]])
                                                                    for h, r in zip(hyps, refs))]


def _bleu_of(stats: list[int]) -> float:
    """Corpus BLEU from summed statistics (sacrebleu's default settings, as corpus_bleu)."""
    from sacrebleu.metrics import BLEU
    return BLEU.compute_bleu(stats[2:6], stats[6:10], stats[0], stats[1]).score


def corpus_bleu(hyps, refs) -> Optional[float]:
    import sacrebleu
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) if hyps else None


def choose_tau(scores: list[float], hyps: list[str], refs: list[str], bar: float = BAR_BLEU,
               min_n: int = MIN_FLAGGED) -> tuple[float, int]:
    """(tau, how many validation outputs fall below it): the largest mean log-prob such that every
    output below it, together, scores under `bar` corpus BLEU (at least min_n of them); -inf if none."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    stats = _bleu_stats([hyps[i] for i in order], [refs[i] for i in order])
    acc, best = [0] * 10, 0
    for k, s in enumerate(stats, 1):
        acc = [a + x for a, x in zip(acc, s)]
        if k >= min_n and k < len(order) and _bleu_of(acc) < bar:
            best = k
    if best == 0:
        return float("-inf"), 0
    lo, hi = scores[order[best - 1]], scores[order[best]]
    return (lo + hi) / 2, best


def _quantile(xs: list[float], q: float) -> float:
    return float(torch.quantile(torch.tensor(xs, dtype=torch.float64), q))


def sentence_label(hyp: str, ref: str) -> Optional[str]:
    """"bad" (sentence chrF under BAD_CHRF, or a repeated word 3-gram), "good" (chrF at least GOOD_CHRF), else None:
    what the warning must catch and what it must leave alone."""
    import sacrebleu
    if repeated_ngram(hyp):
        return "bad"
    score = sacrebleu.sentence_chrf(hyp, [ref]).score
    return "bad" if score < BAD_CHRF else "good" if score >= GOOD_CHRF else None


def wilson_upper(k: int, n: int, z: float = CONFIDENCE_Z) -> float:
    """The Wilson score interval's upper bound of a rate seen k times in n."""
    if n == 0:
        return 1.0
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre + half) / (1 + z * z / n)


def fit_classifier(xs: list[list[float]], labels: list[Optional[str]], goal: float = GOAL_FALSE_ALARMS) -> dict:
    """Logistic regression (L2 1e-3, L-BFGS) of bad against good on standardised FEATURES; the threshold flags the
    most good ones (k of n, the k highest scores) whose false-alarm rate's Wilson upper bound is at most `goal`."""
    keep = [i for i, lab in enumerate(labels) if lab is not None]
    x = torch.tensor([xs[i] for i in keep], dtype=torch.float64)
    y = torch.tensor([labels[i] == "bad" for i in keep], dtype=torch.float64)
    mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
    z = (x - mean) / std
    w = torch.zeros(z.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=500, line_search_fn="strong_wolfe")

    def loss():
        opt.zero_grad()
        out = torch.nn.functional.binary_cross_entropy_with_logits(z @ w + b, y) + 1e-3 * (w * w).sum()
        out.backward()
        return out
    opt.step(loss)
    clf = {"features": list(FEATURES), "mean": [round(v, 6) for v in mean.tolist()],
           "std": [round(v, 6) for v in std.tolist()], "weights": [round(v, 6) for v in w.detach().tolist()],
           "bias": round(b.item(), 6)}
    good = sorted((classifier_score(clf, xs[i]) for i in keep if labels[i] == "good"), reverse=True)
    k = 0
    while k < len(good) and wilson_upper(k + 1, len(good)) <= goal:
        k += 1
    # flagged: strictly above; halfway between the k-th and the (k+1)-th highest good score
    clf["threshold"] = -math.inf if k == len(good) else good[k] if k == 0 else (good[k - 1] + good[k]) / 2
    clf["false_alarm_goal"], clf["good_flagged"] = goal, {"k": k, "n": len(good)}
    return clf


def confusion(flags: list[bool], labels: list[Optional[str]]) -> dict:
    """How the flags fall on the bad, good and in-between outputs, with recall on the bad ones and the false-alarm
    rate on the good ones."""
    out = {}
    for lab in ("bad", "good", None):
        f = [x for x, l in zip(flags, labels) if l == lab]
        out["between" if lab is None else lab] = {"flagged": sum(f), "n": len(f)}
    out["recall"] = round(out["bad"]["flagged"] / max(out["bad"]["n"], 1), 4)
    out["false_alarms"] = round(out["good"]["flagged"] / max(out["good"]["n"], 1), 4)
    return out


def calibrate(hm, data: Optional[str] = None, limit: Optional[int] = None, log=print) -> dict:
    """The meta.json block for a checkpoint: piece statistics, thresholds, the classifier, how they were chosen,
    and (translators) the test BLEU of flagged and unflagged outputs and the warning's confusion table on each
    split. `limit`: the first N items of each split."""
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
    common, seen = unbits(pieces["common"]), unbits(pieces["seen"])
    by_split = {}
    for name, pairs in (("val", val), ("test", test)):
        texts = [s for s, _ in pairs]
        outs = greedy_ids(hm.model, tok, texts, n_new)
        scores = batch_scores(hm, texts, outs, n_new, token_lp=True, spreads=True)
        hyps, refs = [tok.decode(o) for o in outs], [t for _, t in pairs]
        by_split[name] = (hyps, refs, scores, [len(o) < n_new for o in outs])
        log(f"{hm.name}: {name} split, {len(pairs)} outputs scored")
    hyps, refs, scores, _ = by_split["val"]
    tau, n_low = choose_tau([s[0].mean().item() if len(s[0]) else float("nan") for s in scores], hyps, refs)
    rare = [sum(i not in common for i in s[2]) for s in scores]
    th = {"mean_logprob": round(tau, 4), "rare_pieces": math.floor(_quantile(rare, INPUT_QUANTILE)),
          "unseen_pieces": max(sum(i not in seen for i in s[2]) for s in scores),
          "longest_input": pieces["longest_input"]}
    labels = {name: [sentence_label(h, r) for h, r in zip(hyps, refs)] for name, (hyps, refs, _, _) in by_split.items()}
    clf = fit_classifier([features(s[0], *s[3], len(s[2])) for s in by_split["val"][2]], labels["val"])
    report = {}
    for name, (hyps, refs, scores, ended) in by_split.items():
        flags = []
        for (lp, _, src, rows), h, e in zip(scores, hyps, ended):
            c = Confidence(lp.mean().item() if len(lp) else float("nan"), 0, len(lp), len(src),
                           sum(i not in common for i in src), sum(i not in seen for i in src),
                           repeat=repeated_ngram(h), byte_chars=byte_characters(tok, src), cut=not e,
                           score=classifier_score(clf, features(lp, *rows, len(src))))
            flags.append(bool(verdict(c, th, clf)))
        f = [i for i, x in enumerate(flags) if x]
        u = [i for i, x in enumerate(flags) if not x]
        report[name] = {"flagged": {"bleu": corpus_bleu([hyps[i] for i in f], [refs[i] for i in f]), "n": len(f)},
                        "unflagged": {"bleu": corpus_bleu([hyps[i] for i in u], [refs[i] for i in u]), "n": len(u)},
                        "all": {"bleu": corpus_bleu(hyps, refs), "n": len(hyps)},
                        "confusion": confusion(flags, labels[name])}
    how = (f"greedy outputs of {len(val)} validation pairs whose source is not a training source. An output is "
           f"flagged when it repeats a word {REPEAT_N}-gram, its input has a character read as bytes, it was cut at "
           f"the length limit, or a logistic classifier over {', '.join(FEATURES)} scores it above the threshold "
           f"that flags the most validation outputs with sentence chrF at least {GOOD_CHRF:g} whose false-alarm "
           f"rate's one-sided 90% Wilson upper bound stays at most {GOAL_FALSE_ALARMS:.0%} (fitted against those "
           f"under {BAD_CHRF:g} chrF or repeating); or when its input has more rare "
           f"pieces than the {INPUT_QUANTILE:.0%} quantile of the validation sources (seen fewer than {RARE_BELOW} "
           f"times in training sources), more never-seen pieces than any validation source, or more pieces than the "
           f"longest training source. mean_logprob (the mean log-probability under which the {n_low} validation "
           f"outputs together score under {BAR_BLEU:g} corpus BLEU) is used where no classifier is stored.")
    return {"thresholds": th, "classifier": clf, "how": how, "command": _command(hm, limit), "pieces": pieces,
            **report}


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
