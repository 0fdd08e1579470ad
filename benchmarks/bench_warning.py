"""The warning's confusion table on a translator's test split: the bad outputs it catches (sentence chrF against the
reference under 25, or a repeated word 3-gram), the good ones it flags (chrF at least 60), and the repeating ones,
for the warning the app showed before the classifier (the mean log-probability and input thresholds alone) and for
today's (analysis/confidence.py's verdict with the classifier and the rules that need no threshold), measured in
one run on the same greedy outputs. The goal: recall at least 0.7 on the bad ones, false alarms at most 0.05, every
repeating output flagged.

    python -m benchmarks.bench_warning                                  # the shipped translators
    python -m benchmarks.bench_warning --checkpoint checkpoints/zh-en-postnorm --json out.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ["zh-en-postnorm", "zh-en", "zh-en-v1", "zh-en-decoder", "zh-en-prefix"]


def measure(path, data=None) -> dict:
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import confidence as C
    from viz_transformer.run.decoding import default_new_tokens, greedy_ids
    from viz_transformer.training import data as D
    from viz_transformer.training.calibration import confusion, sentence_label
    from viz_transformer.training.evaluation import translation_splits
    hm = load_checkpoint(path)
    cal = hm.meta.get(C.KEY) or {}
    th, clf = cal.get("thresholds") or {}, cal.get("classifier")
    common, seen = C.unbits(cal["pieces"]["common"]), C.unbits(cal["pieces"]["seen"])
    train, _, test = translation_splits(hm.meta, data)
    test, _ = D.unseen_sources(test, train)
    n_new = default_new_tokens(hm.cfg)
    texts, refs = [s for s, _ in test], [t for _, t in test]
    outs = greedy_ids(hm.model, hm.tokenizer, texts, n_new)
    scores = C.batch_scores(hm, texts, outs, n_new, token_lp=True, spreads=True)
    hyps = [hm.tokenizer.decode(o) for o in outs]
    labels = [sentence_label(h, r) for h, r in zip(hyps, refs)]
    before, after = [], []
    for (lp, _, src, rows), h, o in zip(scores, hyps, outs):
        c = C.Confidence(lp.mean().item() if len(lp) else math.nan, 0, len(lp), len(src),
                         sum(i not in common for i in src), sum(i not in seen for i in src))
        before.append(bool(C.verdict(c, th)))                      # the thresholds alone, no classifier
        c.repeat, c.byte_chars, c.cut = C.repeated_ngram(h), C.byte_characters(hm.tokenizer, src), len(o) >= n_new
        c.score = C.classifier_score(clf, C.features(lp, *rows, len(src))) if clf else None
        after.append(bool(C.verdict(c, th, clf)))
    looping = [i for i, h in enumerate(hyps) if C.repeated_ngram(h)]
    # the old rule's mean log-probability threshold moved until it flags as many good outputs as the new warning
    means = [lp.mean().item() if len(lp) else -math.inf for lp, *_ in scores]
    k = sum(after[i] for i, lab in enumerate(labels) if lab == "good")
    good_means = sorted(means[i] for i, lab in enumerate(labels) if lab == "good")
    tau = good_means[k - 1] if k else -math.inf              # flag below: k good outputs at most (ties aside)
    matched = [m < tau for m in means]
    out = {"checkpoint": hm.name, "n": len(test), "classifier": bool(clf)}
    for name, flags in (("before", before), ("after", after), ("matched", matched)):
        out[name] = {**confusion(flags, labels), "repeating": {"flagged": sum(flags[i] for i in looping),
                                                              "n": len(looping)}}
    return out


def table(res: dict) -> str:
    rows = [f"{res['checkpoint']} ({res['n']} test pairs, classifier stored: {res['classifier']})",
            f"{'':8} {'bad flagged':>14} {'good flagged':>14} {'between':>12} {'repeating':>10} {'recall':>7} "
            f"{'false al.':>9}"]
    for name in ("before", "after", "matched"):
        r = res[name]
        rows.append(f"{name:8} {r['bad']['flagged']:>6} of {r['bad']['n']:<5} {r['good']['flagged']:>6} of "
                    f"{r['good']['n']:<5} {r['between']['flagged']:>4} of {r['between']['n']:<5} "
                    f"{r['repeating']['flagged']:>3} of {r['repeating']['n']:<3} {r['recall']:>7.3f} "
                    f"{r['false_alarms']:>9.3f}")
    rows.append("matched: the mean log-probability alone, its threshold moved to flag as many good outputs as 'after'")
    b, a = res["before"], res["after"]
    rows.append(f"recall {a['recall'] / max(b['recall'], 1e-9):.2f}x before; false alarms {a['false_alarms']:.3f} "
                f"against {b['false_alarms']:.3f}; goal: recall >= 0.7 at false alarms <= 0.05, every repeat flagged")
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", action="append", help="default: the shipped translators")
    p.add_argument("--data", help="the training corpus (default: meta.json's)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--record", metavar="MACHINE", help="also add the run to benchmarks/results/history/bench_warning.json, "
                   "with MACHINE as its machine (python -m benchmarks.history bench_warning)")
    a = p.parse_args(argv)
    results = []
    for path in a.checkpoint or [ROOT / "checkpoints" / n for n in SHIPPED]:
        results.append(measure(path, a.data))
        print(table(results[-1]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    if a.record:
        from benchmarks import history
        numbers = "; ".join(f"{r['checkpoint']} recall {r['before']['recall']:.3f} -> {r['after']['recall']:.3f}, false "
                            f"alarms {r['before']['false_alarms']:.3f} -> {r['after']['false_alarms']:.3f}, repeats flagged "
                            f"{r['after']['repeating']['flagged']} of {r['after']['repeating']['n']}" for r in results)
        history.record("bench_warning", "python -m benchmarks.bench_warning " + " ".join(sys.argv[1:] if argv is None else argv), numbers, a.record,
                       results=a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
