"""Command line: train, translate / generate, trace, report, stats, info, evaluate, calibrate, check.

User mistakes (missing checkpoint, empty text, bad flags) print one line to stderr and exit 2.
"""
from __future__ import annotations

import argparse
import json
import sys

from viz_transformer import cli_corpus
from viz_transformer.cli_input import UserError, clean_text, load_model as _load, out_path, stdin_lines
from viz_transformer.core.checkpoint_files import update_meta


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
    from viz_transformer.analysis.confidence import KEY, as_dict, assess_ids
    from viz_transformer.run.decoding import decode
    from viz_transformer.run.decode_settings import DecodeSettings
    hm = _load(args.checkpoint)
    tok = hm.tokenizer
    if hm.cfg.is_encoder_only:
        raise UserError(f"{hm.name} is an encoder-only model (BERT): it reads a text both ways and generates "
                        "nothing; use trace, report or stats, or the app's pages")
    want = "translate" if hm.cfg.is_translator else "generate"
    if args.command != want:
        kind = hm.cfg.architecture.replace("_", "-")
        print(f"note: {hm.name} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} model; `{want}` fits it better",
              file=sys.stderr)

    def one(text: str) -> str:
        if not text.strip():
            return json.dumps({"text": text, "output": "", "confidence": None}, ensure_ascii=False) if args.json else ""
        try:
            tr = decode(hm, text, settings=DecodeSettings(
                args.strategy, args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed,
                args.beam_width, args.length_penalty))
        except ValueError as e:
            raise UserError(str(e)) from None
        if tr.n_cut:
            where = "end" if tr.cut_at == "end" else "start"
            print(f"note: the text does not fit this model's {hm.cfg.max_len} positions: {tr.n_cut} "
                  f"piece(s) cut from its {where}", file=sys.stderr)
        output = tok.decode(tr.generated_ids if hm.cfg.is_translator else tr.prompt_ids + tr.generated_ids)
        c = assess_ids(hm, text, tr.generated_ids, bool(tr.steps) and tr.steps[-1].token_id == tr.eos_id)
        if args.json:
            return json.dumps({"text": text, "output": output, "confidence": as_dict(c, hm.meta.get(KEY) or {})},
                              ensure_ascii=False)
        _say_confidence(hm, c)
        return output

    if args.text is not None:
        if not args.text.strip():
            raise UserError("the text is empty: give --text some words, or leave it out to read lines from stdin")
        print(one(clean_text(args.text)), flush=True)
        return 0
    failed = 0
    for n, line in enumerate(stdin_lines(), 1):   # a bad line gets an empty output line and a note
        try:
            if isinstance(line, Exception):
                raise UserError(str(line))
            print(one(line), flush=True)
        except UserError as e:
            failed += 1
            print(f"error: line {n}: {e}", file=sys.stderr)
            print("", flush=True)
    return 2 if failed else 0


def _say_confidence(hm, c) -> None:
    """The app's confidence line on stderr, and its warning when the output is flagged."""
    from viz_transformer.analysis.confidence import KEY, line, warning_line
    print("\n".join(filter(None, (line(c), warning_line(c, hm.meta.get(KEY) or {})))), file=sys.stderr)


def _run(hm, args):
    try:
        target = getattr(args, "target", None)
        return hm.run(clean_text(args.text), target=None if target is None else clean_text(target))
    except ValueError as e:
        raise UserError(str(e)) from None


def cmd_trace(args) -> int:
    """Dump every captured tensor of one run, keyed by its capture name (export.write_run)."""
    from viz_transformer.export import FORMATS, write_run
    out = out_path(args.out, tuple(FORMATS))
    from viz_transformer.analysis.confidence import assess
    hm = _load(args.checkpoint)
    run = _run(hm, args)
    write_run(run, out)
    print(f"wrote {len(run.cache)} tensors and the token lists to {out}", file=sys.stderr)
    if not hm.cfg.is_encoder_only:
        _say_confidence(hm, assess(hm, run))
    return 0


def _head(spec: str) -> tuple[str, int, int]:
    """"decoder.2.cross_attn:3" -> ("decoder.cross_attn", 2, 3)."""
    from viz_transformer.core.hook_names import parse_prefix
    try:
        prefix, head = spec.rsplit(":", 1)
        return (*parse_prefix(prefix), int(head))
    except ValueError:
        raise UserError(f"--head {spec!r}: write it as BLOCK_PREFIX:HEAD, e.g. encoder.0.self_attn:3") from None


def cmd_report(args) -> int:
    """One self-contained HTML report of a run (report.build_report)."""
    from viz_transformer.core.hook_names import available_blocks, n_layers
    from viz_transformer.report import build_report
    out = out_path(args.out, (".html", ".htm"))
    hm = _load(args.checkpoint)
    heads = [_head(h) for h in args.head] or None
    for block, layer, head in heads or []:
        if block not in available_blocks(hm.cfg) or layer >= n_layers(hm.cfg, block) or head >= hm.cfg.n_heads:
            raise UserError(f"--head {block} layer {layer} head {head} is not in {hm.name} "
                            f"({hm.cfg.n_heads} heads per layer)")
    html = build_report(hm, _run(hm, args), heads)
    out.write_text(html, encoding="utf-8")
    print(f"wrote {out} ({len(html.encode('utf-8')) / 1e6:.2f} MB)", file=sys.stderr)
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


def cmd_check(args) -> int:
    """Run a Hugging Face folder here and in transformers on five fixed texts (run/parity.py): one line, status 0
    when it matches, 1 when it differs."""
    from viz_transformer.run import parity
    hm = _load(args.folder)
    try:
        report = parity.check(hm)
    except (ValueError, parity.MissingTransformers) as e:
        raise UserError(str(e)) from None
    print(parity.summary(report))
    return 0 if report.ok else 1


def cmd_export_hf(args) -> int:
    from viz_transformer.export_hf import write_hf_folder
    hm = _load(args.checkpoint)
    try:
        out, kind = write_hf_folder(hm, args.out)
    except ValueError as e:
        raise UserError(str(e)) from None
    auto = "AutoModelForMaskedLM" if kind == "bert" else "AutoModelForCausalLM"
    print(f"wrote {out} (model_type {kind}): transformers' {auto} and load_checkpoint open it")
    return 0


def cmd_calibrate(args) -> int:
    """Choose the confidence thresholds on the validation split (viz_transformer/analysis/confidence.py), write
    them into the checkpoint's meta.json with how they were chosen, and print the test BLEU of the
    outputs they flag and of the rest."""
    from viz_transformer.training.calibration import calibrate
    from viz_transformer.analysis.confidence import KEY
    hm = _load(args.checkpoint)
    try:
        block = calibrate(hm, args.data, args.limit, log=lambda m: print(m, file=sys.stderr))
    except ValueError as e:
        raise UserError(str(e)) from None
    if not args.dry_run:
        update_meta(args.checkpoint, **{KEY: block})
    print(json.dumps({"checkpoint": hm.name, **{k: v for k, v in block.items() if k not in ("pieces", "how")}},
                     ensure_ascii=False))
    return 0


def cmd_init_grads(args) -> int:
    """Measure the per-layer gradient norms at initialisation with pre- and post-norm on the checkpoint's
    configuration and training split (viz_transformer/training/grad_norms.py), into meta.json."""
    from viz_transformer.training.evaluation import translation_splits
    from viz_transformer.training.grad_norms import KEY, init_gradient_norms
    hm = _load(args.checkpoint)
    if not hm.cfg.is_translator:
        raise UserError("init-grads measures translators (the training split is a translation corpus)")
    try:
        train_items = translation_splits(hm.meta, args.data)[0]
        tc = hm.meta.get("train_config") or {}
        tc = tc if isinstance(tc, dict) else {}
        block = init_gradient_norms(hm.cfg, hm.tokenizer, train_items, max_tokens=tc.get("max_tokens", 64),
                                    label_smoothing=tc.get("label_smoothing", 0.1))
    except (ValueError, OSError) as e:
        raise UserError(str(e)) from None
    update_meta(args.checkpoint, **{KEY: block})
    print(json.dumps({"checkpoint": hm.name, **block}, ensure_ascii=False))
    return 0


def build_parser(prog: str = "python -m viz_transformer", epilog: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Instrumented Transformer tools.", epilog=epilog)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("train", help="train a model (see `train --help`)", add_help=False)
    for name, helptext in (("translate", "translate with a translator checkpoint"),
                           ("generate", "continue text with a decoder-only checkpoint")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("--checkpoint", required=True)
        s.add_argument("--text", help="one input; without it, read one per line from stdin")
        s.add_argument("--json", action="store_true",
                       help="one JSON object a line: the text, the output and its confidence (as the app shows it)")
        _add_decoding_flags(s)
        s.set_defaults(fn=cmd_generate)
    s = sub.add_parser("trace", help="dump one captured run to .npz or .json")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--text", required=True)
    s.add_argument("--target", help="teacher-force this target instead of the model's own output")
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_trace)
    s = sub.add_parser("report", help="one self-contained HTML report of a run (opens offline)")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--text", required=True)
    s.add_argument("--target", help="teacher-force this target instead of the model's own output")
    s.add_argument("--head", action="append", default=[], metavar="PREFIX:HEAD",
                   help="a head to draw, e.g. decoder.2.cross_attn:3 (repeatable; default head 0 of each last layer)")
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_report)
    s = sub.add_parser("info", help="what a checkpoint is")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_info)
    cli_corpus.add_commands(sub)
    s = sub.add_parser("calibrate", help="choose the confidence thresholds on the validation split, into meta.json")
    s.add_argument("checkpoint")
    s.add_argument("--data", help="the training corpus (default: the path recorded in meta.json)")
    s.add_argument("--limit", type=int, help="only the first N pairs of each split (a quick check)")
    s.add_argument("--dry-run", action="store_true", help="print, do not write meta.json")
    s.set_defaults(fn=cmd_calibrate)
    s = sub.add_parser("check", help="run a Hugging Face folder here and in transformers: do they agree?")
    s.add_argument("folder")
    s.set_defaults(fn=cmd_check)
    s = sub.add_parser("export-hf", help="write a checkpoint of ours as a Hugging Face folder: a masked LM as bert, "
                                         "a Llama-style LM as llama")
    s.add_argument("checkpoint")
    s.add_argument("out", help="the folder to write (config.json, model.safetensors, tokenizer.json)")
    s.set_defaults(fn=cmd_export_hf)
    s = sub.add_parser("init-grads", help="per-layer gradient norms at initialisation, pre- and post-norm, into meta.json")
    s.add_argument("checkpoint")
    s.add_argument("--data", help="the training corpus (default: the path recorded in meta.json)")
    s.set_defaults(fn=cmd_init_grads)
    return p


def main(argv=None, prog: str = "python -m viz_transformer", epilog: str | None = None) -> int:
    """The CLI; `viz-transformer` (viz_explorer/launch.py) calls it with its own name and a line on `app`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        from viz_transformer.training.train import main as train_main
        return train_main(argv[1:])
    args = build_parser(prog, epilog).parse_args(argv)
    args.argv = argv
    try:
        return args.fn(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
