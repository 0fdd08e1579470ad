"""The commands that read a corpus: `stats` (head statistics), `attribution` (attention against attribution, τ per
output step) and `evaluate` (held-out scores, or a corpus of one's own). Each runs here by default, or spread over
Ray workers with `--ray [ADDRESS]` (run/ray_pool.py; `pip install .[ray]`), with the same result."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from viz_transformer.cli_input import UserError, load_model, out_path
from viz_transformer.core.checkpoint_files import update_meta

RAY_HELP = ("spread the corpus over Ray workers: a cluster's address (ray://host:10001), or none for a Ray started "
            "here (pip install .[ray]; docs/serving-a-class.md, \"Past one machine: Ray\")")


def _ray_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS", help=RAY_HELP)
    s.add_argument("--workers", type=int, default=2, help="Ray workers, one CPU each, with --ray; without it, "
                   "threads here, each on its own sentences (stats, attribution; default 2)")


def _progress(args):
    return (lambda done, n: print(f"\r{done}/{n} sentences", end="", file=sys.stderr)) if not args.quiet else None


CHUNK = 4096        # sentences read at a time from --corpus (whole batches of 16 and 64): any length, never all held


def _corpus_file(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--corpus {p}: no such file")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--corpus {p}: not UTF-8 text") from None


def _chunks(args, hm):
    """(sentences, [(sentences before, chunk)]): --corpus read CHUNK sentences at a time, else the built-in corpus."""
    from viz_transformer.training import corpora
    if not args.corpus:
        texts = corpora.load(corpora.for_model(hm.cfg))
        return len(texts), [(0, texts)]
    if not Path(args.corpus).is_file():
        raise UserError(f"--corpus {args.corpus}: no such file")
    return corpora.count(args.corpus), corpora.chunks(args.corpus, CHUNK)


def _each_chunk(args, hm, work) -> int:
    """work(sentences before, chunk, progress) for each chunk of the corpus, progress counted over the whole (on
    stderr unless --quiet), inside one Ray connection with --ray. Returns the corpus's sentences."""
    from contextlib import nullcontext
    from viz_transformer.run import ray_pool
    total, parts = _chunks(args, hm)
    progress = _progress(args)
    try:
        with nullcontext() if args.ray is None else ray_pool.session(args.ray or None, args.workers):
            for before, chunk in parts:
                work(before, chunk, (lambda done, n, b=before: progress(b + done, total)) if progress else None)
    except ValueError as e:
        raise UserError(str(e)) from None
    if progress:
        print(file=sys.stderr)
    return total


def cmd_stats(args) -> int:
    """Head statistics averaged over a corpus (one sentence a line, any length), with roles, as CSV."""
    from viz_transformer.export import csv_bytes
    from viz_transformer.analysis.corpus_ray import combine, head_stats_on_ray
    from viz_transformer.analysis.summaries import corpus_head_stats, head_roles
    out = out_path(args.out)
    hm = load_model(args.checkpoint)
    tables = []

    def work(before, chunk, progress):
        if args.ray is None:
            tables.append(corpus_head_stats(hm, chunk, progress, workers=args.workers))
        else:                                   # the same statistics, the corpus spread over Ray workers
            tables.append(head_stats_on_ray(args.checkpoint, chunk, args.ray or None, args.workers, progress=progress))
    total = _each_chunk(args, hm, work)
    df = head_roles(combine(tables) if len(tables) > 1 else tables[0])
    out.write_bytes(csv_bytes(df))
    print(f"wrote {len(df)} heads over {total} sentences to {args.out}", file=sys.stderr)
    return 0


def cmd_attribution(args) -> int:
    """Kendall's τ of each attention-reading method with occlusion at every output step of a corpus (the
    "how often" pass of docs/attribution.md), one row per (sentence, step, method, layer) as CSV, written a chunk of
    sentences at a time; the summary per method printed."""
    import pandas as pd
    from viz_transformer.analysis.attribution import tau_summary
    out = out_path(args.out)
    hm = load_model(args.checkpoint)
    if hm.cfg.is_encoder_only:
        raise UserError(f"{hm.name} writes no output (an encoder alone): there is no output step to attribute")
    if args.max_steps is not None and args.max_steps < 1:
        raise UserError(f"--max-steps must be 1 or more, not {args.max_steps}")
    summary_rows, written = [], [0]
    partial = out.with_name(out.name + ".partial")      # renamed when every chunk is written: nothing half-kept
    try:
        total = _write_taus(args, hm, partial, summary_rows, written)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)
    print(tau_summary(pd.concat(summary_rows, ignore_index=True)).round(3).to_string())
    print(f"wrote {written[0]} rows over {total} sentences to {args.out}", file=sys.stderr)
    return 0


def _write_taus(args, hm, path: Path, summary_rows: list, written: list) -> int:
    """attribution's rows, a chunk of the corpus at a time, into path; the layer -1 rows kept for the summary."""
    from viz_transformer.analysis.attribution import corpus_taus
    from viz_transformer.analysis.corpus_ray import taus_on_ray
    with open(path, "w", encoding="utf-8-sig", newline="") as f:      # a BOM, as export.csv_bytes writes

        def work(before, chunk, progress):
            if args.ray is None:
                df = corpus_taus(hm, chunk, progress, max_steps=args.max_steps, per_layer=True, workers=args.workers)
            else:
                df = taus_on_ray(args.checkpoint, chunk, args.ray or None, args.workers, args.max_steps, progress,
                                 per_layer=True)
            df = df.assign(sentence=df["sentence"] + before)
            df.to_csv(f, index=False, header=written[0] == 0)
            written[0] += len(df)
            summary_rows.append(df[df["layer"] == -1])            # what tau_summary reads
        return _each_chunk(args, hm, work)


def cmd_evaluate(args) -> int:
    """Re-score on the held-out split rebuilt from meta.json (seed and sizes), or on --corpus. A translator is
    scored only on sources never seen in training. Several --checkpoint: all on the same pairs (the first
    one's split minus every source any of them trained on), one JSON line each."""
    from viz_transformer.training import data as D
    from viz_transformer.training.evaluation import evaluate_lm, evaluate_masked_lm, evaluate_translators, on_ray
    if args.record and (args.limit or args.corpus):
        raise UserError("--record keeps scores of the whole held-out split: leave out --limit and --corpus")
    hms = [load_model(c) for c in args.checkpoint]
    translate, nll = (None, None) if args.ray is None else on_ray(args.ray or None, args.workers, args.beam_width,
                                                                    args.length_penalty)
    try:
        corpus = _corpus_file(args.corpus) if args.corpus else None
        pairs = D.parse_pairs(corpus) if corpus is not None and any(hm.cfg.is_translator or hm.cfg.is_encoder_only
                                                                      for hm in hms) else None
        if all(hm.cfg.is_translator for hm in hms):
            results = evaluate_translators(hms, args.split, args.data, args.limit, args.beam_width, args.length_penalty,
                                           keep_translations=args.record, pairs=pairs, translate=translate)
        elif args.beam_width != 1:
            raise ValueError("--beam-width scores translators; a language model is scored by perplexity")
        elif len(hms) == 1 and hms[0].cfg.is_encoder_only:
            if args.ray is not None:
                raise ValueError("--ray scores translators and language models; a masked LM is scored here")
            results = [evaluate_masked_lm(hms[0], args.split, args.data, args.limit, pairs=pairs)]
        elif len(hms) == 1:
            stories = D.parse_stories(corpus) if corpus is not None else None
            results = [evaluate_lm(hms[0], args.data, args.limit, stories=stories, nll=nll)]
        else:
            raise ValueError("several checkpoints are compared only when all are translators")
    except ValueError as e:
        raise UserError(str(e)) from None
    for path, res in zip(args.checkpoint, results):
        translations = res.pop("translations", None)
        print(json.dumps(res, ensure_ascii=False))
        if args.record:      # "test", or "test_beam4": the score, the command that printed it, the translations
            key = args.split if args.beam_width == 1 else f"{args.split}_beam{args.beam_width}"
            kept = {}
            if translations is not None:      # one per line, in the pairs' order (a translation holds no newline)
                kept["translations"] = f"translations-{key}.txt"
                (Path(path) / kept["translations"]).write_text("".join(h + "\n" for h in translations), "utf-8")
            update_meta(path, **{key: {**{k: v for k, v in res.items() if k != "checkpoint"}, **kept,
                                    "command": shlex.join(["python", "-m", "viz_transformer", *args.argv])}})
    return 0


def add_commands(sub) -> None:
    s = sub.add_parser("stats", help="per-head attention statistics over a corpus, as CSV")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--corpus", help="a text file, one sentence a line (default: the built-in held-out corpus)")
    s.add_argument("--out", required=True)
    s.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _ray_flags(s)
    s.set_defaults(fn=cmd_stats)
    s = sub.add_parser("attribution", help="attention against attribution (τ with occlusion) at every output step "
                                           "of a corpus, as CSV")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--corpus", help="a text file, one sentence a line (default: the built-in held-out corpus)")
    s.add_argument("--out", required=True)
    s.add_argument("--max-steps", type=int, help="the first N output steps of each sentence (default: all)")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _ray_flags(s)
    s.set_defaults(fn=cmd_attribution)
    s = sub.add_parser("evaluate", help="BLEU/chrF (translator), perplexity (LM) or fill-in accuracy (masked LM) "
                                        "on the held-out split, or on a corpus of one's own")
    s.add_argument("--checkpoint", required=True, action="append",
                   help="repeat it to score several translators on exactly the same pairs")
    s.add_argument("--data", help="the training corpus (default: the path recorded in meta.json)")
    s.add_argument("--split", choices=("test", "val", "captions"), default="test",
                   help="translators: captions is a second held-out split, image captions from another corpus")
    s.add_argument("--corpus", help="score this file whole instead of a held-out split: source<TAB>reference a line "
                                    "(translators, masked LMs), or plain text (language models)")
    s.add_argument("--limit", type=int)
    s.add_argument("--beam-width", type=int, default=1,
                   help="translators: beam search of this width (default 1: greedy, as training scores)")
    s.add_argument("--length-penalty", type=float, default=1.0, help="with --beam-width: score / length ** this")
    s.add_argument("--record", action="store_true",
                   help="also write each score, with this command, into its checkpoint's meta.json "
                        "(key: the split, or e.g. test_beam4)")
    _ray_flags(s)
    s.set_defaults(fn=cmd_evaluate)
