"""Attention over training: the patterns of fixed sentences recorded while a translator trains.

Snapshots are taken at log-spaced steps from step 0 (the random initialisation, before any update)
to the end, and at every epoch's end (so the step whose weights ship is among them). Each holds,
for every sentence of SNAPSHOT_PAIRS teacher-forced on its fixed reference (so frames compare),
every attention block's pattern; plus the training loss, validation BLEU on a fixed subset and the
greedy translations at that step. Stored beside the checkpoint as float16 safetensors + JSON:

    snaps = load_training_snapshots("checkpoints/zh-en")
    snaps.steps, snaps.pattern(-1, 0, "decoder.0.cross_attn.hook_pattern")   # [head, q, k]
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch
from safetensors.torch import load_file, save_file

from viz_transformer.core.tokenizer import display_pieces

# sentence, its fixed reference translation: the frames of every snapshot are teacher-forced on these
SNAPSHOT_PAIRS = [("我是一名工程师。", "I am an engineer."), ("我喜欢你。", "I like you."),
                  ("你喜欢我。", "You like me."), ("我是学生。", "I am a student."),
                  ("今天天气很好。", "The weather is nice today."), ("他是我的朋友。", "He is my friend.")]
WEIGHTS, INDEX = "training_snapshots.safetensors", "training_snapshots.json"
MAX_BYTES = 3_000_000     # the snapshot file's budget inside a checkpoint folder


def planned_steps(total: int, n: int = 14) -> list[int]:
    """Step 0, then n - 1 log-spaced steps from 1 to total (duplicates merged)."""
    if total <= 0:
        return [0]
    return sorted({0} | {int(round(math.exp(math.log(total) * i / (n - 2)))) for i in range(n - 1)})


@dataclass
class Snapshots:
    """What `load_training_snapshots` returns: one entry per recorded step, in step order."""
    steps: list[int]
    texts: list[str]
    targets: list[str]
    src_pieces: list[Optional[list[str]]]        # per text: encoder input (None for one sequence)
    tgt_pieces: list[list[str]]                  # per text: decoder input (the whole sequence)
    prompt_len: list[int]                        # per text: decoder positions before the target
    loss: list[Optional[float]]                  # per step: training loss (smoothed) at that step
    bleu: list[Optional[float]]                  # per step: validation BLEU on bleu_n fixed pairs
    translations: list[list[str]]                # per step, per text: greedy output
    patterns: dict[str, torch.Tensor]            # "{step index}/{text index}/{capture name}" -> [head, q, k]
    shipped_step: Optional[int] = None           # the step whose weights are in model.safetensors
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    bleu_n: int = 0
    architecture: str = ""
    prefix_len: list[Optional[int]] = field(default_factory=list)   # per text: a prefix LM's bidirectional prefix
    metric: str = "bleu"                         # what `bleu` holds: "bleu", or "fill_top5" (a masked LM's top-5
                                                 # fill-in accuracy in %, masked_lm.fill_accuracy)

    def pattern(self, i_step: int, i_text: int, name: str) -> torch.Tensor:
        i_step = i_step % len(self.steps)
        return self.patterns[f"{i_step}/{i_text}/{name}"].float()

    def stack(self, i_step: int, i_text: int, block: str) -> torch.Tensor:
        """Every layer of one attention block: [layer, head, q, k]."""
        from viz_transformer.core.hook_names import hook_name
        layers = sorted({int(n.split(".")[1]) for n in self.names() if n.endswith(f"{block.split('.')[1]}.hook_pattern")
                         and n.startswith(block.split(".")[0] + ".")})
        return torch.stack([self.pattern(i_step, i_text, hook_name(block, ly, "hook_pattern")) for ly in layers])

    def axes(self, i_text: int, block: str) -> tuple[list[str], list[str]]:
        """Query and key labels of sentence i_text's pattern in `block`; a target row names the piece it is
        trained to predict ("▁an → ▁engineer")."""
        from viz_transformer.analysis.piece_labels import next_pieces, row_labels
        tgt, src = self.tgt_pieces[i_text], self.src_pieces[i_text]
        rows = row_labels(tgt, next_pieces(tgt))
        return {"encoder.self_attn": (src, src), "decoder.cross_attn": (rows, src), "decoder.self_attn": (rows, tgt)}[block]

    def names(self) -> list[str]:
        """Capture names recorded (the same for every step and text)."""
        return sorted({k.split("/", 2)[2] for k in self.patterns if k.startswith("0/0/")})

    @property
    def shipped_index(self) -> Optional[int]:
        return self.steps.index(self.shipped_step) if self.shipped_step in self.steps else None


def capture_patterns(hm, pairs=SNAPSHOT_PAIRS) -> list:
    """One teacher-forced Run per (text, reference) with only the attention patterns captured."""
    return [hm.run(text, target=ref, names_filter=lambda n: n.endswith("hook_pattern")) for text, ref in pairs]


class Recorder:
    """Takes snapshots inside the training loop; keeps them in the work folder so a resumed run
    goes on where it stopped; `finish` copies them next to the shipped weights. The score each snapshot keeps
    (index "bleu", named by "metric") is a translator's validation BLEU."""
    metric = "bleu"

    def __init__(self, work: Path, total: int, bleu_fn: Callable[[object], float], bleu_n: int,
                 architecture: str, pairs=SNAPSHOT_PAIRS):
        self.work, self.pairs, self.bleu_fn = Path(work), list(pairs), bleu_fn
        self.plan = planned_steps(total)
        path = self.work / INDEX
        self.index = json.loads(path.read_text()) if path.exists() else {
            "texts": [s for s, _ in pairs], "targets": [t for _, t in pairs], "steps": [], "loss": [], "bleu": [],
            "translations": [], "loss_curve": [], "bleu_n": bleu_n, "architecture": architecture,
            "metric": self.metric}
        wpath = self.work / WEIGHTS
        self.tensors = load_file(str(wpath)) if wpath.exists() and self.index["steps"] else {}

    def due(self, step: int) -> bool:
        return step in self.plan and step not in self.index["steps"]

    def note_loss(self, step: int, loss: float, every: int = 25) -> None:
        if step % every == 0:
            self.index["loss_curve"].append([step, round(loss, 4)])

    @torch.no_grad()
    def record(self, model, tok, step: int, loss: Optional[float]) -> None:
        """Snapshot the model as it is now (eval mode for the snapshot, restored after)."""
        from viz_transformer.run.capture import HookedModel
        if step in self.index["steps"]:
            return
        was_training = model.training
        hm = HookedModel(model, tok)                       # puts the model in eval mode
        runs = self.capture(hm)
        i = len(self.index["steps"])
        for j, run in enumerate(runs):
            for name, t in run.cache.items():
                self.tensors[f"{i}/{j}/{name}"] = t[0].to(torch.float16).cpu().contiguous()
        self.index.setdefault("src_pieces", [r.src_pieces for r in runs])
        self.index.setdefault("tgt_pieces", [r.tgt_pieces for r in runs])
        self.index.setdefault("prompt_len", [r.prompt_len for r in runs])
        self.index.setdefault("prefix_len", [r.prefix_len for r in runs])
        self.index["steps"].append(step)
        self.index["loss"].append(None if loss is None else round(loss, 4))
        self.index["bleu"].append(round(self.bleu_fn(model), 2))
        self.index["translations"].append(self.outputs(hm, runs))
        model.train(was_training)
        self.save(self.work)

    def capture(self, hm) -> list:
        """The runs whose attention a snapshot keeps (a translator: each text teacher-forced on its reference)."""
        return capture_patterns(hm, self.pairs)

    def outputs(self, hm, runs) -> list[str]:
        """What the model makes of each text at this step (a translator: its greedy translation)."""
        from viz_transformer.run.decoding import greedy_batch
        return greedy_batch(hm.model, hm.tokenizer, [s for s, _ in self.pairs], max_new_tokens=40)

    def save(self, folder: Path, keep: Optional[list[int]] = None, shipped_step: Optional[int] = None) -> None:
        """Write the snapshots (those at steps `keep`, or all) into `folder`, atomically."""
        index, tensors = dict(self.index), self.tensors
        if keep is not None:
            chosen = [i for i, s in enumerate(index["steps"]) if s in keep]
            renumber = {old: new for new, old in enumerate(chosen)}
            tensors = {f"{renumber[int(k.split('/', 1)[0])]}/{k.split('/', 1)[1]}": v for k, v in tensors.items()
                       if int(k.split("/", 1)[0]) in renumber}
            for key in ("steps", "loss", "bleu", "translations"):
                index[key] = [index[key][i] for i in chosen]
        index["shipped_step"] = shipped_step
        folder.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(folder / (WEIGHTS + ".tmp")))
        (folder / (WEIGHTS + ".tmp")).replace(folder / WEIGHTS)
        (folder / (INDEX + ".tmp")).write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")
        (folder / (INDEX + ".tmp")).replace(folder / INDEX)

    def finish(self, out: Path, shipped_step: int) -> None:
        """Copy the planned steps and the shipped step into the checkpoint folder, dropping the
        other epoch ends if the file would exceed MAX_BYTES."""
        self.save(out, shipped_step=shipped_step)
        if (out / WEIGHTS).stat().st_size > MAX_BYTES:
            self.save(out, keep=sorted(set(self.plan) | {shipped_step}), shipped_step=shipped_step)


def has_training_snapshots(path) -> bool:
    """Whether a checkpoint folder holds recorded snapshots (both files), without reading them."""
    folder = Path(path)
    return (folder / INDEX).is_file() and (folder / WEIGHTS).is_file()


def load_training_snapshots(path) -> Optional[Snapshots]:
    """The snapshots stored in a checkpoint folder, or None when it has none. No unpickling."""
    folder = Path(path)
    if not has_training_snapshots(folder):
        return None
    try:
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / WEIGHTS))
    except (OSError, ValueError, RuntimeError) as e:
        raise ValueError(f"{folder / INDEX} or {WEIGHTS} is unreadable ({e})") from None
    shown = lambda rows: [display_pieces(r) if r is not None else None for r in rows]   # as the app shows pieces
    return Snapshots(index["steps"], index["texts"], index["targets"], shown(index["src_pieces"]), shown(index["tgt_pieces"]),
                     index["prompt_len"], index["loss"], index["bleu"], index["translations"], tensors,
                     index.get("shipped_step"), [tuple(x) for x in index.get("loss_curve", [])],
                     index.get("bleu_n", 0), index.get("architecture", ""), index.get("prefix_len", []),
                     index.get("metric", "bleu"))
