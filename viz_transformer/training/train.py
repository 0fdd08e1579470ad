"""Training: SentencePiece first, then the Transformer, for translation or language modelling.

Resumable (state saved every epoch in --work, resume.py), progress bar with loss, tokens/s and ETA. What the two
tasks do differently (their data, batches, inputs and score) is tasks.py's; one step is step.py's.
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
from tqdm import tqdm

from viz_transformer.core.checkpoint import load_tokenizer, load_weights, read_config, read_meta, save_checkpoint
from viz_transformer.core.config import ModelConfig
from viz_transformer.run.decoding import greedy_batch
from viz_transformer.training.evaluation import curve_meta, score_translation
from viz_transformer.core.model import Transformer
from viz_transformer.training.grad_norms import KEY as GRAD_NORMS
from viz_transformer.training.masked_lm import SNAPSHOT_TEXTS, fill_scores, top_fills
from viz_transformer.training.resume import ResumeError, load_state, save_state
from viz_transformer.training.snapshots import Recorder
from viz_transformer.training.tasks import TASKS
from viz_transformer.training.step import lr_at, make_optimizer, train_step
from viz_transformer.core.tokenizer import Tokenizer, one_piece_per_cjk_character

DEMO_ZH = ["我是一名工程师。", "我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。",
           "他是我的朋友。", "我们明天去北京。"]
DEMO_EN = ["Once upon a time", "The little dog", "Lily and Tom went to the park."]


@dataclass
class TrainConfig:
    task: str = "translation"          # translation | lm | mlm (a masked LM, BERT, on both sides of the pairs)
    data: str = ""                     # TSV of pairs, source file, or plain text
    data_tgt: Optional[str] = None     # target file when the pairs come as two line-aligned files
    extra_train: Optional[str] = None  # more pairs for training only, as "SRC_FILE,TGT_FILE" (detokenized)
    out: str = "checkpoints/model"     # the checkpoint folder written (best epoch so far)
    work: Optional[str] = None         # resume state; default: runs/<name of out>
    vocab_size: int = 8000
    epochs: int = 20
    batch_size: int = 64               # sentences (translation) or blocks (lm) per step
    block_size: int = 256              # lm: tokens per training sequence
    max_tokens: int = 64               # translation: longer pairs are skipped in training
    lr: float = 7e-4
    warmup: int = 600                  # steps of linear warm-up
    schedule: str = "cosine"           # cosine | inverse_sqrt (after warm-up)
    weight_decay: float = 0.01
    label_smoothing: float = 0.1
    clip: float = 1.0
    seed: int = 1234
    n_test: int = 1500                 # held out, never trained on, scored once at the end
    n_val: int = 1000                  # held out, scored every epoch to pick the best
    threads: int = 2
    max_steps: Optional[int] = None    # stop early (tests, smoke runs)
    eval_limit: Optional[int] = None   # score only this many validation items (tests)
    fp16: bool = True                  # store weights as float16 (loaded as float32)
    snapshots: bool = True             # translation: record attention over training (snapshots.py)
    snapshot_bleu_n: int = 100         # validation pairs scored at each snapshot (greedy, ≤ 40 new tokens)
    init_from: Optional[str] = None    # start from this checkpoint's weights, config and tokenizer (fine-tuning)
    cjk_chars: bool = False            # every CJK character its own piece (tokenizer.one_piece_per_cjk_character)
    fast: bool = True                  # cheaper step: whole-epoch length buckets, logits only where scored, fused AdamW (off: as before)


MODEL_FIELDS = [f for f in dataclasses.fields(ModelConfig) if f.name not in ("vocab_size", "pad_id", "bos_id", "eos_id", "sep_id")]


def _field_comments(cls) -> dict[str, str]:
    """The trailing `# comment` of each dataclass field: the one place its help text lives."""
    out = {}
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+): [^=]+=.*?#\s*(.+)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m viz_transformer train", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    helps = {**_field_comments(ModelConfig), **_field_comments(TrainConfig)}
    for f in list(dataclasses.fields(TrainConfig)) + MODEL_FIELDS:
        flag, default, hlp = f"--{f.name.replace('_', '-')}", f.default, helps.get(f.name, f.name.replace('_', ' '))
        if isinstance(default, bool):
            p.add_argument(flag, dest=f.name, default=default, action=argparse.BooleanOptionalAction, help=hlp)
        else:
            ann = str(f.type)
            typ = int if "int" in ann else float if "float" in ann else str
            p.add_argument(flag, dest=f.name, default=default, type=typ, help=hlp)
    return p


# -- a run's parts: its tokenizer, model config and starting state ---------------------------------
def base_record(folder, bm: dict) -> dict:
    """What meta.json keeps of the checkpoint a fine-tuning run started from (`init_from`), out of its meta.json
    `bm`: where it was, how it was made (its own `init_from` too, for a chain), what it scored and its weights'
    checksum."""
    keep = ("command", "train_config", "split", "train_seconds", "val", "test", "test_beam4", "curve", "plateau",
            "weights_sha256", "init_from")
    return {"checkpoint": str(folder), **{k: bm[k] for k in keep if k in bm}}


def _log(msg: str) -> None:
    tqdm.write(msg, file=sys.stderr)


def tokenizer(tc: TrainConfig, work: Path, text: list[str]) -> Tokenizer:
    """The run's tokenizer: the one in `work` (a resumed run), else init_from's, else SentencePiece trained on
    `text` (the training split only); with cjk_chars one piece per CJK character. Saved in `work`."""
    tok_path = work / "tokenizer.model"
    if tok_path.exists():
        tok = Tokenizer.load(tok_path)
        if tok.vocab_size != tc.vocab_size:
            raise ResumeError(f"{work} holds a tokenizer of {tok.vocab_size} pieces, not the {tc.vocab_size} asked "
                              f"for (a different model): delete {work} to start again, or pass the same options")
        return tok
    if tc.init_from:
        tok = load_tokenizer(tc.init_from, read_config(tc.init_from))
    else:
        _log(f"training SentencePiece ({tc.vocab_size} pieces) on {len(text)} lines ...")
        tok = Tokenizer.train(text, tc.vocab_size, sep=tc.task == "translation", masked_lm=tc.task == "mlm")
    if tc.cjk_chars:
        tok = Tokenizer(one_piece_per_cjk_character(tok.model_proto))
    tok.save(tok_path)
    return tok


def model_config(tc: TrainConfig, model_kw: dict, arch: str, tok: Tokenizer, work: Path) -> ModelConfig:
    """The flags' model with the tokenizer's ids, or init_from's config (fine-tuning: whatever the flags say)."""
    kw = dict(model_kw, architecture=arch, vocab_size=tok.vocab_size, pad_id=tok.pad_id,
              bos_id=tok.bos_id, eos_id=tok.eos_id)
    if arch == "encoder_only":
        kw["n_decoder_layers"] = 0
    elif arch != "encoder_decoder":
        kw["n_encoder_layers"] = 0
        if tc.task == "translation":
            if tok.sep_id < 0:
                raise ResumeError(f"{work / 'tokenizer.model'} has no [sep] piece (made by an older version): "
                                  f"delete {work}")
            kw["sep_id"] = tok.sep_id
    cfg = ModelConfig(**kw)
    if tc.init_from:
        cfg = read_config(tc.init_from)
        if cfg.vocab_size != tok.vocab_size:
            raise ResumeError(f"{tc.init_from} has {cfg.vocab_size} pieces, its tokenizer {tok.vocab_size}")
    return cfg


def start_state(tc: TrainConfig, model) -> dict:
    """A new run's progress (resume.py saves it in state.json); a fine-tune loads init_from's weights and records
    where it started."""
    info = {"epoch": 0, "step": 0, "best": None, "history": [], "seconds": 0.0}
    if tc.init_from:
        model.load_state_dict(load_weights(tc.init_from, model.cfg).state_dict())
        base = read_meta(tc.init_from)                     # read now: the folder may be replaced later
        info["init_from"] = base_record(tc.init_from, base)
        if GRAD_NORMS in base:
            info[GRAD_NORMS] = base[GRAD_NORMS]            # measured at its random start
    return info


# -- main -------------------------------------------------------------------------------------
def train(tc: TrainConfig, model_kw: dict, command: str = "") -> Path:
    torch.set_num_threads(tc.threads)
    torch.manual_seed(tc.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = Path(tc.out)
    work = Path(tc.work or Path("runs") / out.name)
    work.mkdir(parents=True, exist_ok=True)

    task = TASKS[tc.task](tc, model_kw)
    arch = read_config(tc.init_from).architecture if tc.init_from else task.arch   # a fine-tune: the checkpoint's
    tok = tokenizer(tc, work, task.tok_text)
    cfg = model_config(tc, model_kw, arch, tok, work)
    steps_per_epoch = task.encode(tok, cfg)
    total = tc.epochs * steps_per_epoch
    if tc.max_steps:
        total = min(total, tc.max_steps)

    model = Transformer(cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(model, tc)
    info = load_state(work, model, opt)
    if info is None:
        info = start_state(tc, model)
    task.measure_start(info, cfg, tok)
    rec = task.recorder(work, total, tok, cfg)
    if info["epoch"]:
        _log(f"resuming from {work} after epoch {info['epoch']} (step {info['step']})")
    _log(f"{cfg.architecture}: {n_params / 1e6:.2f}M parameters, {steps_per_epoch} steps/epoch, "
         f"{len(task.train_items)} training items, device {device}")

    step = info["step"]
    for epoch in range(info["epoch"], tc.epochs):
        if step >= total:
            break
        t0 = time.time()
        step, loss_ema = train_epoch(model, opt, tc, task, tok, rec, epoch, step, total, device, t0)
        model.eval()
        metrics, better = task.evaluate(model, tok, info["best"])
        info["seconds"] += time.time() - t0
        metrics.update(epoch=epoch + 1, step=step, train_loss=round(loss_ema or 0.0, 4))
        info["history"].append(metrics)
        _log(f"epoch {epoch + 1}: {metrics}" + ("  (best so far, saved)" if better else ""))
        if better:
            info["best"] = metrics
            save_best(out, model, tok, tc, task, info, n_params, command, device)
        if rec is not None:                 # every epoch end: the shipped step is one of them
            rec.record(model, tok, step, loss_ema)
            rec.finish(out, info["best"]["step"])     # the app can play training back while it goes on
        info.update(epoch=epoch + 1, step=step)
        save_state(work, model, opt, info)

    finish(out, tc, task.test, info["history"])
    return out


def train_epoch(model, opt, tc: TrainConfig, task, tok, rec: Optional[Recorder], epoch: int, step: int, total: int,
                device, t0: float) -> tuple[int, Optional[float]]:
    """One epoch's steps (the run's last ones stop at `total`), with its progress bar; returns (the step reached, the
    loss's moving average)."""
    model.train()
    bar = tqdm(task.batches(epoch)[: total - step], desc=f"epoch {epoch + 1}/{tc.epochs}", file=sys.stderr,
               mininterval=1.0 if sys.stderr.isatty() else 30.0, dynamic_ncols=True)
    ntok, loss_ema = 0, None
    for batch in bar:
        if rec is not None and rec.due(step):
            rec.record(model, tok, step, loss_ema if step else None)
        x, tgt, pl, y, *types = task.inputs(batch, model.cfg, tok.pad_id, device)   # a masked LM: segment ids
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, tc, total)
        loss = train_step(model, opt, tc, x, y, tok.pad_id, tgt, pl, types[0] if types else None)
        step += 1
        ntok += int((y != tok.pad_id).sum())
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        if rec is not None:
            rec.note_loss(step, loss_ema)
        bar.set_postfix(loss=f"{loss_ema:.3f}", tok_s=f"{ntok / (time.time() - t0):.0f}",
                        lr=f"{opt.param_groups[0]['lr']:.1e}", refresh=False)
    bar.close()
    return step, loss_ema


def save_best(out: Path, model, tok, tc: TrainConfig, task, info: dict, n_params: int, command: str, device) -> None:
    """The checkpoint folder `out` for the best epoch so far (info["best"]), with how it was made in meta.json."""
    meta = {"task": tc.task, "data": tc.data, "extra_train": tc.extra_train,
            "trained_at": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command,
            "n_params": n_params, "train_items": len(task.train_items), "split_seed": tc.seed,
            "split": task.split, "n_val": len(task.val), "n_test": len(task.test), "val": info["best"],
            "train_seconds": round(info["seconds"]), "train_config": dataclasses.asdict(tc)}
    for key in (GRAD_NORMS, "init_from"):
        if key in info:
            meta[key] = info[key]
    meta.update(curve_meta(info["history"]))
    save_checkpoint(out, model.cpu(), tok, meta, fp16=tc.fp16)
    model.to(device)


def finish(out: Path, tc: TrainConfig, test, history: Optional[list] = None) -> None:
    """Score the best checkpoint on the test split and record demo outputs and the curve in meta.json."""
    cfg = read_config(out)
    model, tok = load_weights(out, cfg), load_tokenizer(out, cfg)
    meta = read_meta(out)
    if history is not None:
        meta.update(curve_meta(history))
    if tc.task == "translation":
        meta["test"] = score_translation(model, tok, test)
        meta["demo"] = dict(zip(DEMO_ZH, greedy_batch(model, tok, DEMO_ZH)))
    elif tc.task == "mlm":
        meta["test"] = fill_scores(model, tok, test)
        meta["demo"] = {t: fills for t, fills in zip(SNAPSHOT_TEXTS, top_fills(model, tok, SNAPSHOT_TEXTS))}
    else:
        meta["demo"] = dict(zip(DEMO_EN, greedy_batch(model, tok, DEMO_EN, max_new_tokens=40)))
    (out / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tqdm.write(f"test: {meta.get('test')}\ndemo: {json.dumps(meta['demo'], ensure_ascii=False)}", file=sys.stderr)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    d = vars(args)
    tc = TrainConfig(**{f.name: d[f.name] for f in dataclasses.fields(TrainConfig)})
    for path in filter(None, [tc.data, tc.data_tgt] + (tc.extra_train or "").split(",")):
        if not Path(path).is_file():
            print(f"error: training data {path} not found", file=sys.stderr)
            return 2
    if not tc.data:
        print("error: --data is required (a TSV of pairs, a source file, or plain text)", file=sys.stderr)
        return 2
    if tc.task not in TASKS:
        print(f"error: --task must be translation, lm or mlm, not {tc.task!r}", file=sys.stderr)
        return 2
    model_kw = {f.name: d[f.name] for f in MODEL_FIELDS}
    cmd = "python -m viz_transformer train " + " ".join(argv if argv is not None else sys.argv[2:])
    try:
        train(tc, model_kw, command=cmd)
    except ResumeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
