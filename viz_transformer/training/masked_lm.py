"""A masked language model's training inputs and its score: BERT's masking, and fill-in-the-blank accuracy.

Masking (Devlin et al. 2019): 15% of a sequence's text pieces (at least one) are chosen; the model must give back
each chosen piece. Of the chosen pieces 80% are replaced by [MASK], 10% by a random piece and 10% kept, so the
model cannot learn that only [MASK] positions matter.

Fill-in accuracy: one piece per held-out sentence is replaced by [MASK] (a text piece, never punctuation, a bare
space or a special, chosen by a generator seeded with the sentence itself, so every run and every model blanks the
same piece); top-1 and top-5 count how often the hidden piece is the model's best, or among its five best, there.

    fill_accuracy(model, tok, ["我是学生。", "I am a student."])   # {"top1": …, "top5": …, "n": 2}
"""
from __future__ import annotations

import random
import unicodedata
from typing import Optional, Sequence

import torch

from viz_transformer.core.batch import pad_rows
from viz_transformer.core.tokenizer import WORD_START
from viz_transformer.training.snapshots import Recorder

RATE, AS_MASK, AS_RANDOM = 0.15, 0.8, 0.1

# the texts whose attention the training playback shows: each blank has one right answer a student can guess
SNAPSHOT_TEXTS = ["我是一名工[MASK]师。", "I am an [MASK].", "我[MASK]你。", "I [MASK] you.",
                  "今天天气很[MASK]。", "He is my [MASK]."]


def is_text_piece(piece: str) -> bool:
    """A piece worth blanking: it holds a character that is not punctuation, and is not a byte piece (<0xE4>)."""
    body = piece.lstrip(WORD_START)
    if not body or (body.startswith("<0x") and body.endswith(">")):
        return False
    return any(not unicodedata.category(c).startswith("P") for c in body)


def maskable(tok, ids: Sequence[int]) -> list[int]:
    """The positions of `ids` (a sentence's pieces, no specials around them) that may be blanked."""
    return [i for i, x in enumerate(ids) if int(x) not in tok.specials and is_text_piece(tok.sp.id_to_piece(int(x)))]


def mask_rows(rows: list[list[int]], tok, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences ([CLS] … [SEP], any length) -> (inputs x [B, T], targets y [B, T]): BERT's masking; y holds the
    original piece where one was chosen and [PAD] (not scored) elsewhere."""
    x = pad_rows(rows, tok.pad_id)
    special = torch.zeros_like(x, dtype=torch.bool)
    for s in tok.specials:
        special |= x == s
    pick = (torch.rand(x.shape, generator=generator) < RATE) & ~special
    none = ~pick.any(1) & (~special).any(1)                     # every row scores at least one piece
    if none.any():
        score = torch.rand(x.shape, generator=generator).masked_fill(special, -1.0)
        first = score.argmax(1)
        pick[none.nonzero()[:, 0], first[none]] = True
    y = x.masked_fill(~pick, tok.pad_id)
    how = torch.rand(x.shape, generator=generator)
    x = x.masked_fill(pick & (how < AS_MASK), tok.mask_id)
    swap = pick & (how >= AS_MASK) & (how < AS_MASK + AS_RANDOM)
    x[swap] = torch.randint(len(tok.specials), tok.vocab_size, (int(swap.sum()),), generator=generator)
    return x, y


def blank(tok, text: str) -> Optional[tuple[list[int], int, int]]:
    """(the sentence's input ids [CLS] … [SEP] with one piece masked, its position, the hidden piece), the piece
    chosen by a generator seeded with the text; None for a text with no piece to blank."""
    ids = tok.encode(text)
    where = maskable(tok, ids)
    if not where:
        return None
    i = random.Random(text).choice(where)
    full = [tok.bos_id] + ids + [tok.eos_id]
    hidden, full[i + 1] = full[i + 1], tok.mask_id
    return full, i + 1, hidden


@torch.no_grad()
def fill_accuracy(model, tok, texts: Sequence[str], batch_size: int = 128) -> dict:
    """{"top1", "top5" (fractions), "n" (sentences scored)}: each text with one piece blanked (`blank`), the
    masked-LM head's best pieces there; texts with nothing to blank are skipped."""
    was_training = model.training
    model.eval()
    items = [b for b in map(lambda t: blank(tok, t), texts) if b is not None]
    top1 = top5 = 0
    for s in range(0, len(items), batch_size):
        chunk = items[s:s + batch_size]
        x = pad_rows([c[0] for c in chunk], tok.pad_id)
        at = torch.zeros_like(x, dtype=torch.bool)
        at[torch.arange(len(chunk)), torch.tensor([c[1] for c in chunk])] = True
        best = model(x, logits_at=at).topk(5, dim=-1).indices.cpu()           # (N, 5), rows in batch order
        hidden = torch.tensor([c[2] for c in chunk])[:, None]
        top1 += int((best[:, :1] == hidden).sum())
        top5 += int((best == hidden).any(1).sum())
    model.train(was_training)
    n = len(items)
    return {"top1": round(top1 / max(n, 1), 4), "top5": round(top5 / max(n, 1), 4), "n": n}


def fill_scores(model, tok, pairs: Sequence[tuple[str, str]], limit: Optional[int] = None) -> dict:
    """Fill-in accuracy on each side of (Chinese, English) pairs: {"top1_zh", "top5_zh", "n_zh", … "_en",
    "top5": the mean of the two top-5s}."""
    pairs = pairs[:limit] if limit else pairs
    out = {}
    for side, lang in ((0, "zh"), (1, "en")):
        r = fill_accuracy(model, tok, [p[side] for p in pairs])
        out.update({f"top1_{lang}": r["top1"], f"top5_{lang}": r["top5"], f"n_{lang}": r["n"]})
    out["top5"] = round((out["top5_zh"] + out["top5_en"]) / 2, 4)
    return out


@torch.no_grad()
def top_fills(model, tok, texts: Sequence[str]) -> list[str]:
    """The model's best piece at each [MASK] of each text (pieces joined by spaces)."""
    was_training = model.training
    model.eval()
    out = []
    for text in texts:
        ids, _ = tok.encode_pair(text)
        logits = model(torch.tensor([ids]))[0]
        out.append(" ".join(tok.pieces([int(logits[i].argmax()) for i, x in enumerate(ids) if x == tok.mask_id])))
    model.train(was_training)
    return out


class FillRecorder(Recorder):
    """Attention over training for a masked LM: the patterns of SNAPSHOT_TEXTS, the top fill at each blank, and
    the top-5 fill-in accuracy (in %) on fixed validation sentences."""
    metric = "fill_top5"

    def __init__(self, work, total: int, score_fn, n: int, architecture: str):
        super().__init__(work, total, score_fn, n, architecture, pairs=[(t, "") for t in SNAPSHOT_TEXTS])

    def capture(self, hm) -> list:
        return [hm.run(text, names_filter=lambda n: n.endswith("hook_pattern")) for text, _ in self.pairs]

    def outputs(self, hm, runs) -> list[str]:
        from viz_transformer.run.fill_mask import mask_positions
        return [" ".join(hm.tokenizer.pieces([int(r.logits[i].argmax()) for i in mask_positions(hm, r)])) for r in runs]
