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
    want = "translate" if hm.cfg.is_encoder_decoder else "generate"
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
        if hm.cfg.is_encoder_decoder:
            return tok.decode(tr.generated_ids)
        return tok.decode(tr.prompt_ids + tr.generated_ids)

    if args.text is not None:
        print(one(_clean(args.text)), flush=True)
        return 0
    failed = 0
    for n, line in enumerate(_stdin_lines(), 1):   # a bad line gets an empty output line and a note
        try:
            if isinstance(line, Exception):
                raise UserError(str(line))
            print(one(line), flush=True)
        except UserError as e:
            failed += 1
            print(f"error: line {n}: {e}", file=sys.stderr)
            print("", flush=True)
    return 2 if failed else 0


def _clean(text: str) -> str:
    """argv holds undecodable bytes as lone surrogates: read them as U+FFFD, with a note."""
    clean = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if clean != text:
        print("note: the text is not valid UTF-8: undecodable bytes read as U+FFFD", file=sys.stderr)
    return clean


def _stdin_lines():
    """stdin's lines as text, read as bytes with a cap: a line longer than the text limit is skipped
    (yielded as a ValueError) without holding it whole; invalid UTF-8 becomes U+FFFD, with a note."""
    from .inputs import MAX_CHARS
    cap = 4 * MAX_CHARS + 2                        # UTF-8 needs at most 4 bytes a character
    stream = sys.stdin.buffer
    n = 0
    while True:
        raw = stream.readline(cap)
        if not raw:
            return
        n += 1
        if not raw.endswith(b"\n") and len(raw) == cap:
            size = len(raw)
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(1 << 20)
                size += len(raw)
            size -= raw.endswith(b"\n")
            yield ValueError(f"the line has {size:,} bytes; the text limit is {MAX_CHARS:,} characters")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            print(f"note: line {n} is not valid UTF-8 ({e.reason} at byte {e.start}): undecodable bytes "
                  f"read as U+FFFD", file=sys.stderr)
            text = raw.decode("utf-8", "replace")
        yield text.rstrip("\r\n")


def cmd_trace(args) -> int:
    """Dump every captured tensor of one run, keyed by its capture name."""
    hm = _load(args.checkpoint)
    try:
        run = hm.run(_clean(args.text), target=None if args.target is None else _clean(args.target))
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
    only on sources never seen in training: a checkpoint split by source has no others; for one
    split by pair (older checkpoints), test pairs whose source is also in training are left out."""
    from . import data as D
    from .train import lm_perplexity, score_translation
    hm = _load(args.checkpoint)
    m = hm.meta
    data = args.data or m.get("data")
    if not data or not Path(data).exists():
        raise UserError(f"training data {data!r} not found: pass --data")
    seed, n_test, n_val = m.get("split_seed", 1234), m.get("n_test", 1500), m.get("n_val", 1000)
    if hm.cfg.is_encoder_decoder:
        pairs = D.read_pairs(data)
        by_source = m.get("split") == "by_source"
        train, val, test = (D.split_by_source if by_source else D.split)(pairs, seed, n_test, n_val)
        if m.get("extra_train"):
            train = train + D.read_pairs(*m["extra_train"].split(","), detok=True)
        items, dropped = D.unseen_sources(test if args.split == "test" else val, train)
        res = score_translation(hm.model, hm.tokenizer, items, args.limit) if items else \
            {"bleu": None, "chrf": None, "n": 0}
        res.update(split=args.split, unseen_sources_only=True, split_by="source" if by_source else "pair",
                   n_dropped_seen=dropped)
    else:
        _, val, _ = D.split(D.read_stories(data), seed, 0, m.get("n_val", 100))
        block = m.get("train_config", {}).get("block_size", 256)
        blocks = D.blocks(D.token_stream(val, hm.tokenizer), block)
        res = {"perplexity": round(lm_perplexity(hm.model, blocks[: args.limit]), 3), "split": "val"}
    print(json.dumps(res, ensure_ascii=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m viz_transformer", description="Instrumented Transformer tools.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("train", help="train a model (see `train --help`)", add_help=False)
    for name, helptext in (("translate", "translate with an encoder-decoder checkpoint"),
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
    s.add_argument("--checkpoint", required=True)
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
