"""Training: SentencePiece first, then the Transformer, for translation or language modelling.

Resumable (state saved every epoch in --work), progress bar with loss, tokens/s and ETA.
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from tqdm import tqdm

from viz_transformer.training import data as D
from viz_transformer.core.checkpoint import load_tokenizer, load_weights, read_config, read_meta, save_checkpoint
from viz_transformer.core.config import ModelConfig
from viz_transformer.run.decoding import greedy_batch
from viz_transformer.training.evaluation import curve_meta, lm_perplexity, score_translation
from viz_transformer.core.batch import pad_rows
from viz_transformer.core.model import Transformer
from viz_transformer.training.resume import ResumeError, load_state, save_state
from viz_transformer.training.snapshots import Recorder
from viz_transformer.core.tokenizer import Tokenizer, one_piece_per_cjk_character

DEMO_ZH = ["我是一名工程师。", "我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。",
           "他是我的朋友。", "我们明天去北京。"]
DEMO_EN = ["Once upon a time", "The little dog", "Lily and Tom went to the park."]


@dataclass
class TrainConfig:
    task: str = "translation"          # translation | lm
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


# -- data -------------------------------------------------------------------------------------
def translation_batches(pairs_ids, batch_size: int, seed: int, fast: bool = True):
    """Length-bucketed batches (lists of indices) of (src ids, tgt ids) or (sequence ids, prompt
    length): the items shuffled by seed, sorted by length within a pool, cut into batches, and the
    batches shuffled. fast: the pool is the whole epoch and pairs sort by target length first (the
    decoder and the vocabulary projection cost the most), so a batch pads little; ties keep the
    shuffled order, so equal-length items meet different neighbours each epoch. Not fast (as before):
    pools of 50 batches, pairs sorted by source length first."""
    rng = random.Random(seed)
    idx = list(range(len(pairs_ids)))
    rng.shuffle(idx)
    lengths = [tuple(x if isinstance(x, int) else len(x) for x in p) for p in pairs_ids]
    if fast:
        chunk = max(1, len(idx))
        key = (lambda i: lengths[i][::-1]) if pairs_ids and not isinstance(pairs_ids[0][1], int) else lengths.__getitem__
    else:
        chunk, key = batch_size * 50, lengths.__getitem__
    batches = []
    for c in range(0, len(idx), chunk):
        part = sorted(idx[c:c + chunk], key=key)
        batches += [part[b:b + batch_size] for b in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def target_only(x: torch.Tensor, prompt_len: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Next-token targets of sequences x [B, T] ([begin] src [sep] tgt [end]) with every prediction
    made before the last prompt position ([sep]) set to pad_id (ignored by the loss): [B, T - 1]."""
    pos = torch.arange(x.shape[1] - 1, device=x.device)[None]             # position that predicts
    return x[:, 1:].masked_fill(pos < prompt_len[:, None] - 1, pad_id)


def encode_translation(tok, items, arch: str, max_tokens: int) -> list[tuple]:
    """(source, target) texts -> training items, pairs longer than max_tokens skipped: (source ids [end],
    [begin] target ids [end]) for an encoder-decoder, else one sequence [begin] src [sep] tgt [end] and
    the prompt's length."""
    enc = [(tok.encode(s) + [tok.eos_id], [tok.bos_id] + tok.encode(t) + [tok.eos_id]) for s, t in items]
    enc = [p for p in enc if len(p[0]) <= max_tokens and len(p[1]) <= max_tokens + 1]
    if arch != "encoder_decoder":
        enc = [([tok.bos_id] + s[:-1] + [tok.sep_id] + t[1:], len(s) + 1) for s, t in enc]
    return enc


def translation_inputs(enc, batch, arch: str, pad_id: int, device="cpu"):
    """Batch indices into the encoded training items -> (x, tgt, prefix_len, y): the model's
    inputs and the next-token targets y (pad_id where nothing is scored)."""
    if arch == "encoder_decoder":
        src = pad_rows([enc[i][0] for i in batch], pad_id).to(device)
        tgt = pad_rows([enc[i][1] for i in batch], pad_id).to(device)
        return src, tgt[:, :-1], None, tgt[:, 1:]
    # one sequence: the loss on the target only, the predictions made from [sep] on
    x = pad_rows([enc[i][0] for i in batch], pad_id).to(device)
    pl = torch.tensor([enc[i][1] for i in batch], device=device)
    return x[:, :-1], None, pl if arch == "prefix_lm" else None, target_only(x, pl, pad_id)


def batch_loss(model, x, y, pad_id: int, label_smoothing: float, tgt=None, prefix_len=None,
               fast: bool = True) -> torch.Tensor:
    """Mean cross-entropy over the scored targets of y [B, T] (pad_id: not scored). fast: logits only at
    the scored positions (the vocabulary projection skips padding and prompts); the same loss."""
    if fast:
        scored = y != pad_id
        logits = model(x, tgt, prefix_len=prefix_len, logits_at=scored)             # (N, vocab)
        return F.cross_entropy(logits, y[scored], label_smoothing=label_smoothing)
    logits = model(x, tgt, prefix_len=prefix_len)                                     # (B, T, vocab)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                           ignore_index=pad_id, label_smoothing=label_smoothing)


def make_optimizer(model, tc: TrainConfig) -> torch.optim.AdamW:
    """AdamW, no weight decay on biases and norms; fast: the fused kernel where this torch has it."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if tc.fast:
        try:
            return torch.optim.AdamW(groups, lr=tc.lr, betas=(0.9, 0.98), fused=True)
        except (RuntimeError, TypeError):
            pass
    return torch.optim.AdamW(groups, lr=tc.lr, betas=(0.9, 0.98))


def train_step(model, opt, tc: TrainConfig, x, y, pad_id: int, tgt=None, prefix_len=None) -> torch.Tensor:
    """One optimisation step (gradients clipped to tc.clip) at the learning rate already set; returns the loss."""
    loss = batch_loss(model, x, y, pad_id, tc.label_smoothing, tgt, prefix_len, fast=tc.fast)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip)
    opt.step()
    return loss.detach()


def lr_at(step: int, tc: TrainConfig, total: int) -> float:
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    if tc.schedule == "inverse_sqrt":
        return tc.lr * math.sqrt(tc.warmup / (step + 1))
    progress = min(1.0, (step - tc.warmup) / max(1, total - tc.warmup))
    return tc.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def base_record(folder, bm: dict) -> dict:
    """What meta.json keeps of the checkpoint a fine-tuning run started from (`init_from`), out of its meta.json
    `bm`: where it was, how it was made (its own `init_from` too, for a chain), what it scored and its weights'
    checksum."""
    keep = ("command", "train_config", "split", "train_seconds", "val", "test", "test_beam4", "curve", "plateau",
            "weights_sha256", "init_from")
    return {"checkpoint": str(folder), **{k: bm[k] for k in keep if k in bm}}


# -- main -------------------------------------------------------------------------------------
def train(tc: TrainConfig, model_kw: dict, command: str = "") -> Path:
    torch.set_num_threads(tc.threads)
    torch.manual_seed(tc.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = Path(tc.out)
    work = Path(tc.work or Path("runs") / out.name)
    work.mkdir(parents=True, exist_ok=True)
    log = lambda msg: tqdm.write(msg, file=sys.stderr)

    # 1. data and tokenizer (trained on the training split only)
    if tc.task == "translation":
        pairs = D.read_pairs(tc.data, tc.data_tgt)
        train_items, val, test = D.split_by_source(pairs, tc.seed, tc.n_test, tc.n_val)
        if tc.extra_train:
            src_f, tgt_f = tc.extra_train.split(",")
            train_items = train_items + D.read_pairs(src_f, tgt_f, detok=True)
        tok_text = [s for s, _ in train_items] + [t for _, t in train_items]
        arch = model_kw.get("architecture") or "encoder_decoder"
    else:
        train_items, val, test = D.split(D.read_stories(tc.data), tc.seed, 0, tc.n_val)
        tok_text = [line for doc in train_items for line in doc.splitlines() if line.strip()]
        arch = model_kw.get("architecture") or "decoder_only"
        if arch == "encoder_decoder":
            arch = "decoder_only"
    if tc.init_from:                       # fine-tuning: the checkpoint's architecture, whatever the flags say
        arch = read_config(tc.init_from).architecture
    tok_path = work / "tokenizer.model"
    if tok_path.exists():
        tok = Tokenizer.load(tok_path)
        if tok.vocab_size != tc.vocab_size:
            raise ResumeError(f"{work} holds a tokenizer of {tok.vocab_size} pieces, not the {tc.vocab_size} asked "
                              f"for (a different model): delete {work} to start again, or pass the same options")
    else:
        if tc.init_from:
            tok = load_tokenizer(tc.init_from, read_config(tc.init_from))
        else:
            log(f"training SentencePiece ({tc.vocab_size} pieces) on {len(tok_text)} lines ...")
            tok = Tokenizer.train(tok_text, tc.vocab_size, sep=tc.task == "translation")
        if tc.cjk_chars:
            tok = Tokenizer(one_piece_per_cjk_character(tok.model_proto))
        tok.save(tok_path)

    kw = dict(model_kw, architecture=arch, vocab_size=tok.vocab_size, pad_id=tok.pad_id,
              bos_id=tok.bos_id, eos_id=tok.eos_id)
    if arch != "encoder_decoder":
        kw["n_encoder_layers"] = 0
        if tc.task == "translation":
            if tok.sep_id < 0:
                raise ResumeError(f"{tok_path} has no [sep] piece (made by an older version): delete {work}")
            kw["sep_id"] = tok.sep_id
    cfg = ModelConfig(**kw)
    if tc.init_from:                       # fine-tuning: the model is the checkpoint's, whatever the flags say
        cfg = read_config(tc.init_from)
        if cfg.vocab_size != tok.vocab_size:
            raise ResumeError(f"{tc.init_from} has {cfg.vocab_size} pieces, its tokenizer {tok.vocab_size}")

    if tc.task == "translation":
        enc = encode_translation(tok, train_items, arch, tc.max_tokens)
        steps_per_epoch = math.ceil(len(enc) / tc.batch_size)
    else:
        train_ids, val_blocks = D.token_stream(train_items, tok), D.blocks(D.token_stream(val, tok), tc.block_size)
        n_blocks = (len(train_ids) - 1) // tc.block_size
        steps_per_epoch = math.ceil(n_blocks / tc.batch_size)
    total = tc.epochs * steps_per_epoch
    if tc.max_steps:
        total = min(total, tc.max_steps)

    model = Transformer(cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(model, tc)
    info = load_state(work, model, opt)
    if info is None:
        info = {"epoch": 0, "step": 0, "best": None, "history": [], "seconds": 0.0}
        if tc.init_from:
            model.load_state_dict(load_weights(tc.init_from, cfg).state_dict())
            base = read_meta(tc.init_from)                     # read now: the folder may be replaced later
            info["init_from"] = base_record(tc.init_from, base)
            if "init_grad_norms" in base:
                info["init_grad_norms"] = base["init_grad_norms"]       # measured at its random start
    if tc.task == "translation" and "init_grad_norms" not in info:
        from viz_transformer.training.grad_norms import init_gradient_norms     # (it imports this module)
        info["init_grad_norms"] = init_gradient_norms(cfg, tok, train_items, max_tokens=tc.max_tokens,
                                                      label_smoothing=tc.label_smoothing)
    rec = None
    if tc.task == "translation" and tc.snapshots:
        bleu_val = val[: tc.snapshot_bleu_n]
        rec = Recorder(work, total, lambda m: score_translation(m, tok, bleu_val, max_new_tokens=40)["bleu"], len(bleu_val), arch)
    if info["epoch"]:
        log(f"resuming from {work} after epoch {info['epoch']} (step {info['step']})")
    log(f"{cfg.architecture}: {n_params / 1e6:.2f}M parameters, {steps_per_epoch} steps/epoch, "
        f"{len(train_items)} training items, device {device}")

    step = info["step"]
    for epoch in range(info["epoch"], tc.epochs):
        if step >= total:
            break
        model.train()
        t0 = time.time()
        if tc.task == "translation":
            batches = translation_batches(enc, tc.batch_size, tc.seed + epoch, fast=tc.fast)
        else:
            g = torch.Generator().manual_seed(tc.seed + epoch)
            shift = int(torch.randint(0, tc.block_size, (1,), generator=g))   # new block boundaries each epoch
            epoch_blocks = D.blocks(train_ids[shift:], tc.block_size)             # (n, block + 1)
            n = len(epoch_blocks)
            order = torch.randperm(n, generator=g)
            batches = [order[b:b + tc.batch_size] for b in range(0, n, tc.batch_size)]
        bar = tqdm(batches[: total - step], desc=f"epoch {epoch + 1}/{tc.epochs}", file=sys.stderr,
                   mininterval=1.0 if sys.stderr.isatty() else 30.0, dynamic_ncols=True)
        ntok, loss_ema = 0, None
        for batch in bar:
            if rec is not None and rec.due(step):
                rec.record(model, tok, step, loss_ema if step else None)
            if tc.task == "translation":
                x, tgt, pl, y = translation_inputs(enc, batch, arch, tok.pad_id, device)
            else:
                x, tgt, pl = epoch_blocks[batch].to(device), None, None
                if cfg.architecture == "prefix_lm":
                    # a random bidirectional prefix per sequence; positions inside it see their
                    # next token, so only predictions from the last prefix position on are scored
                    pl = torch.randint(1, tc.block_size // 2 + 1, (x.shape[0],)).to(device)
                    y = x[:, 1:].masked_fill(torch.arange(tc.block_size, device=device)[None] < (pl[:, None] - 1),
                                             tok.pad_id)
                else:
                    y = x[:, 1:]
                x = x[:, :-1]
            for grp in opt.param_groups:
                grp["lr"] = lr_at(step, tc, total)
            loss = train_step(model, opt, tc, x, y, tok.pad_id, tgt, pl)
            step += 1
            ntok += int((y != tok.pad_id).sum())
            loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
            if rec is not None:
                rec.note_loss(step, loss_ema)
            bar.set_postfix(loss=f"{loss_ema:.3f}", tok_s=f"{ntok / (time.time() - t0):.0f}",
                            lr=f"{opt.param_groups[0]['lr']:.1e}", refresh=False)
        bar.close()

        # 2. evaluate, keep the best
        model.eval()
        if tc.task == "translation":
            metrics = score_translation(model, tok, val, tc.eval_limit)
            better = info["best"] is None or metrics["bleu"] > info["best"]["bleu"]
        else:
            metrics = {"perplexity": round(lm_perplexity(model, val_blocks[: tc.eval_limit]), 3)}
            better = info["best"] is None or metrics["perplexity"] < info["best"]["perplexity"]
        info["seconds"] += time.time() - t0
        metrics.update(epoch=epoch + 1, step=step, train_loss=round(loss_ema or 0.0, 4))
        info["history"].append(metrics)
        log(f"epoch {epoch + 1}: {metrics}" + ("  (best so far, saved)" if better else ""))
        if better:
            info["best"] = metrics
            meta = {"task": tc.task, "data": tc.data, "extra_train": tc.extra_train,
                    "trained_at": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command,
                    "n_params": n_params, "train_items": len(train_items), "split_seed": tc.seed,
                    "split": "by_source" if tc.task == "translation" else "by_story",
                    "n_val": len(val), "n_test": len(test), "val": metrics,
                    "train_seconds": round(info["seconds"]), "train_config": dataclasses.asdict(tc)}
            if "init_grad_norms" in info:
                meta["init_grad_norms"] = info["init_grad_norms"]
            if "init_from" in info:
                meta["init_from"] = info["init_from"]
            meta.update(curve_meta(info["history"]))
            save_checkpoint(out, model.cpu(), tok, meta, fp16=tc.fp16)
            model.to(device)
        if rec is not None:                 # every epoch end: the shipped step is one of them
            rec.record(model, tok, step, loss_ema)
            rec.finish(out, info["best"]["step"])     # the app can play training back while it goes on
        info.update(epoch=epoch + 1, step=step)
        save_state(work, model, opt, info)

    finish(out, tc, test, info["history"])
    return out


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
    if tc.task not in ("translation", "lm"):
        print(f"error: --task must be translation or lm, not {tc.task!r}", file=sys.stderr)
        return 2
    model_kw = {f.name: d[f.name] for f in MODEL_FIELDS}
    cmd = "python -m viz_transformer train " + " ".join(argv if argv is not None else sys.argv[2:])
    try:
        train(tc, model_kw, command=cmd)
    except ResumeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
