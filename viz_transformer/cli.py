"""Command line: train, translate / generate, trace, info, evaluate.

User mistakes (missing checkpoint, empty text, bad flags) print one line to stderr and exit 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class UserError(Exception):
    """A mistake the user can fix: printed without a traceback."""


def _load(path):
    from .capture import load_checkpoint
    from .checkpoint import CheckpointError
    try:
        return load_checkpoint(path)
    except CheckpointError as e:
        raise UserError(str(e)) from None


def _add_decoding_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--greedy", dest="strategy", action="store_const", const="greedy", help="(default)")
    g.add_argument("--beam", dest="strategy", action="store_const", const="beam")
    g.add_argument("--sample", dest="strategy", action="store_const", const="sample")
    p.set_defaults(strategy="greedy")
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=64)


def cmd_generate(args) -> int:
    """translate / generate: --text once, or one input per stdin line, one output per line.
    An LM's line is the prompt it kept and its continuation, decoded together from the ids."""
    from .decoding import decode
    hm = _load(args.checkpoint)
    tok = hm.tokenizer
    want = "translate" if hm.cfg.is_translator else "generate"
    if args.command != want:
        print(f"note: {hm.name} is a {hm.cfg.architecture} model; `{want}` fits it better", file=sys.stderr)

    def one(text: str) -> str:
        if not text.strip():
            return ""
        try:
            tr = decode(hm, text, args.strategy, args.max_new_tokens, args.temperature, args.top_k,
                        args.top_p, args.seed, args.beam_width, args.length_penalty)
        except ValueError as e:
            raise UserError(str(e)) from None
        if tr.n_cut:
            where = "end" if tr.cut_at == "end" else "start"
            print(f"note: the text does not fit this model's {hm.cfg.max_len} positions: {tr.n_cut} "
                  f"piece(s) cut from its {where}", file=sys.stderr)
        if hm.cfg.is_translator:
            return tok.decode(tr.generated_ids)
        return tok.decode(tr.prompt_ids + tr.generated_ids)

    lines = [args.text] if args.text is not None else (line.rstrip("\n") for line in sys.stdin)
    for line in lines:
        print(one(line), flush=True)
    return 0


def cmd_trace(args) -> int:
    """Dump every captured tensor of one run, keyed by its capture name."""
    hm = _load(args.checkpoint)
    try:
        run = hm.run(args.text, target=args.target)
    except ValueError as e:
        raise UserError(str(e)) from None
    out = Path(args.out)
    tokens = {"tokens.src": run.src_pieces or [], "tokens.tgt": run.tgt_pieces}
    if out.suffix == ".npz":
        import numpy as np
        arrays = {k: v.numpy() for k, v in run.cache.items()}
        arrays.update({k: np.array(v, dtype=str) for k, v in tokens.items()})
        arrays["output"] = np.array(run.output, dtype=str)
        np.savez_compressed(out, **arrays)
    elif out.suffix == ".json":
        doc = {k: v.tolist() for k, v in run.cache.items()}
        doc.update(tokens, output=run.output)
        out.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    else:
        raise UserError(f"--out must end in .npz or .json, not {out.suffix or '(nothing)'}")
    print(f"wrote {len(run.cache)} tensors and the token lists to {out}", file=sys.stderr)
    return 0


def cmd_info(args) -> int:
    hm = _load(args.checkpoint)
    info = {"checkpoint": str(hm.path), **hm.describe(),
            **{k: hm.meta.get(k) for k in ("task", "data", "trained_at", "train_items", "val", "test", "demo", "command")
               if k in hm.meta}}
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
    else:
        width = max(len(k) for k in info)
        for k, v in info.items():
            v = json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v
            print(f"{k:<{width}}  {v}")
    return 0


def cmd_evaluate(args) -> int:
    """Re-score on the held-out split rebuilt from meta.json (seed and sizes). A translator is scored
    only on sources never seen in training. Several --checkpoint: all on the same pairs (the first
    one's split minus every source any of them trained on), one JSON line each."""
    from .evaluation import evaluate_lm, evaluate_translators
    hms = [_load(c) for c in args.checkpoint]
    try:
        if all(hm.cfg.is_translator for hm in hms):
            results = evaluate_translators(hms, args.split, args.data, args.limit)
        elif len(hms) == 1:
            results = [evaluate_lm(hms[0], args.data, args.limit)]
        else:
            raise ValueError("several checkpoints are compared only when all are translators")
    except ValueError as e:
        raise UserError(str(e)) from None
    for res in results:
        print(json.dumps(res, ensure_ascii=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m viz_transformer", description="Instrumented Transformer tools.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("train", help="train a model (see `train --help`)", add_help=False)
    for name, helptext in (("translate", "translate with a translator checkpoint"),
                           ("generate", "continue text with a decoder-only checkpoint")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("--checkpoint", required=True)
        s.add_argument("--text", help="one input; without it, read one per line from stdin")
        _add_decoding_flags(s)
        s.set_defaults(fn=cmd_generate)
    s = sub.add_parser("trace", help="dump one captured run to .npz or .json")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--text", required=True)
    s.add_argument("--target", help="teacher-force this target instead of the model's own output")
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_trace)
    s = sub.add_parser("info", help="what a checkpoint is")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_info)
    s = sub.add_parser("evaluate", help="BLEU/chrF (translator) or perplexity (LM) on the held-out split")
    s.add_argument("--checkpoint", required=True, action="append",
                   help="repeat it to score several translators on exactly the same pairs")
    s.add_argument("--data", help="the training corpus (default: the path recorded in meta.json)")
    s.add_argument("--split", choices=("test", "val"), default="test")
    s.add_argument("--limit", type=int)
    s.set_defaults(fn=cmd_evaluate)
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        from .train import main as train_main
        return train_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
