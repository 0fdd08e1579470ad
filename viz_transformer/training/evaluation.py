"""Held-out scores: BLEU/chrF for translators, perplexity for language models, fill-in accuracy for masked LMs.

Splits are rebuilt from each checkpoint's meta.json (data, seed, sizes). Several translators are
scored on exactly the same pairs: the first one's split minus every pair whose source any of
them trained on, so no model is rewarded for remembering a training sentence.
"""
from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F

from viz_transformer.core.checkpoint_files import update_meta
from viz_transformer.training import data as D
from viz_transformer.run.decoding import beam_batch


def score_translation(model, tok, pairs, limit=None, max_new_tokens=None, beam_width: int = 1,
                      length_penalty: float = 1.0, keep_translations: bool = False) -> dict:
    """Corpus BLEU and chrF (sacrebleu) of the model's translations of `pairs`: greedy, or beam search when
    beam_width > 1 (then the result says so). keep_translations: the translations too, in the pairs' order
    ("translations", a list of strings)."""
    import sacrebleu
    pairs = pairs[:limit] if limit else pairs
    hyps = beam_batch(model, tok, [s for s, _ in pairs], beam_width, length_penalty, max_new_tokens)
    refs = [t for _, t in pairs]
    res = {"bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
           "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2), "n": len(pairs)}
    if beam_width > 1:
        res.update(beam_width=beam_width, length_penalty=length_penalty)
    if keep_translations:
        res["translations"] = hyps
    return res


@torch.no_grad()
def lm_perplexity(model, blocks: torch.Tensor, batch_size: int = 16) -> float:
    model.eval()
    nll, n = 0.0, 0
    for b in range(0, len(blocks), batch_size):
        x = blocks[b:b + batch_size]
        logits = model(x[:, :-1])
        y = x[:, 1:]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                               ignore_index=model.cfg.pad_id, reduction="sum")
        nll += loss.item()
        n += (y != model.cfg.pad_id).sum().item()
    return math.exp(nll / max(n, 1))


def translation_splits(meta: dict, data: Optional[str] = None):
    """(train, val, test) pairs of a translator, as its training run cut them."""
    data = data or meta.get("data")
    if not data or not Path(data).exists():
        raise ValueError(f"training data {data!r} not found: pass --data")
    seed, n_test, n_val = meta.get("split_seed", 1234), meta.get("n_test", 1500), meta.get("n_val", 1000)
    by_source = meta.get("split") == "by_source"
    train, val, test = (D.split_by_source if by_source else D.split)(D.read_pairs(data), seed, n_test, n_val)
    if meta.get("extra_train"):
        train = train + D.read_pairs(*meta["extra_train"].split(","), detok=True)
    return train, val, test


CAPTIONS_N, CAPTIONS_MAX_CHARS, CAPTIONS_SEED = 1000, 30, 1234


def captions_split(data: str) -> list[tuple[str, str]]:
    """The second held-out split: CAPTIONS_N pairs drawn (seeded) from the 3AM image captions beside the
    Tatoeba corpus, their Chinese at most CAPTIONS_MAX_CHARS characters (Tatoeba's sentences are at most 44,
    10 on average). Another source and another register than the training pairs, so a model that only fits
    the project's own split does not win here too."""
    folder = Path(data).parent / "3am-captions"
    if not (folder / "val.zh").exists():
        raise ValueError(f"the captions split needs {folder}/{{train,val}}.{{zh,en}}")
    pairs = [p for part in ("val", "train")
             for p in D.read_pairs(folder / f"{part}.zh", folder / f"{part}.en", detok=True)]
    short = sorted({p for p in pairs if len(p[0]) <= CAPTIONS_MAX_CHARS})
    random.Random(CAPTIONS_SEED).shuffle(short)
    return short[:CAPTIONS_N]


def common_heldout(hms: list, split: str = "test", data: Optional[str] = None):
    """(pairs, n dropped): `split` of the first model (or the captions split), without the sources any model
    trained on."""
    _, val, test = translation_splits(hms[0].meta, data)
    if split == "captions":
        items = captions_split(data or hms[0].meta.get("data"))
    else:
        items = test if split == "test" else val
    dropped = 0
    for hm in hms:
        items, n = D.unseen_sources(items, translation_splits(hm.meta, data)[0])
        dropped += n
    return items, dropped


def evaluate_translators(hms: list, split: str = "test", data: Optional[str] = None,
                         limit: Optional[int] = None, beam_width: int = 1, length_penalty: float = 1.0,
                         keep_translations: bool = False) -> list[dict]:
    """One result per model, all on the same held-out pairs, all decoded alike (greedy, or beam search);
    keep_translations: each result holds its model's translations too (score_translation)."""
    items, dropped = common_heldout(hms, split, data)
    out = []
    for hm in hms:
        res = (score_translation(hm.model, hm.tokenizer, items, limit, beam_width=beam_width,
                                 length_penalty=length_penalty, keep_translations=keep_translations) if items else {"bleu": None, "chrf": None, "n": 0})
        by = [("source" if h.meta.get("split") == "by_source" else "pair") for h in hms]
        res.update(split=split, unseen_sources_only=True, split_by=by[0], n_dropped_seen=dropped)
        if len(hms) > 1:
            res = {"checkpoint": hm.name, "architecture": hm.cfg.architecture, **res}
        out.append(res)
    return out


def story_splits(meta: dict, data: Optional[str] = None):
    """(train, val, test) stories of a language model, as its training run cut them."""
    data = data or meta.get("data")
    if not data or not Path(data).exists():
        raise ValueError(f"training data {data!r} not found: pass --data")
    return D.split(D.read_stories(data), meta.get("split_seed", 1234), meta.get("n_test", 0), meta.get("n_val", 100))


def evaluate_lm(hm, data: Optional[str] = None, limit: Optional[int] = None) -> dict:
    m = hm.meta
    _, val, _ = story_splits(m, data)
    blocks = D.blocks(D.token_stream(val, hm.tokenizer), m.get("train_config", {}).get("block_size", 256))
    return {"perplexity": round(lm_perplexity(hm.model, blocks[:limit]), 3), "split": "val"}


def evaluate_masked_lm(hm, split: str = "test", data: Optional[str] = None, limit: Optional[int] = None) -> dict:
    """A masked LM's fill-in accuracy (masked_lm.fill_scores: one blank per sentence, each language apart) on the
    held-out split of the pairs it trained on, rebuilt from meta.json."""
    from viz_transformer.training.masked_lm import fill_scores
    if split not in ("test", "val"):
        raise ValueError(f"a masked LM is scored on its own test or val split, not {split!r}")
    _, val, test = translation_splits(hm.meta, data)
    return {**fill_scores(hm.model, hm.tokenizer, test if split == "test" else val, limit), "split": split}


PLATEAU_GAIN = {"bleu": 0.5, "perplexity": 0.5, "top5": 0.005}   # BLEU points, perplexity points, a masked LM's
                                                                  # top-5 fill-in accuracy (a fraction: half a point)


def plateau(history: list[dict], tail: float = 0.2) -> Optional[dict]:
    """How much the validation score still rose over the last `tail` of the updates: the best score of the
    whole run against the best at or before (1 - tail) of its final step ("plateaued" = less than 0.5 BLEU
    gained over the last 20% of updates). BLEU for translators (higher is better), top-5 fill-in accuracy for
    masked LMs (higher is better), perplexity for LMs (lower is better; the gain is the drop). None before there
    are two epochs."""
    if len(history) < 2:
        return None
    key = next((k for k in ("bleu", "top5") if k in history[0]), "perplexity")
    sign = -1.0 if key == "perplexity" else 1.0
    cut = (1.0 - tail) * history[-1]["step"]
    early = [sign * h[key] for h in history if h["step"] <= cut]
    if not early:
        return None
    gain = round(max(sign * h[key] for h in history) - max(early), 3)
    return {"metric": key, "tail": tail, "from_step": int(cut), "to_step": history[-1]["step"], "gain": gain,
            "plateaued": gain < PLATEAU_GAIN[key]}


def curve_meta(history: list[dict]) -> dict:
    """What meta.json keeps of the run's course: the validation score after every epoch, and whether it has
    plateaued (evaluation.plateau)."""
    return {"curve": history, "plateau": plateau(history)}


def record_curve(out, work) -> dict:
    """Write the whole validation curve of the run in `work` into the checkpoint `out`'s meta.json (a run
    that ended before meta kept its curve); returns what was written."""
    history = json.loads((Path(work) / "state.json").read_text())["history"]
    kept = curve_meta(history)
    update_meta(out, **kept)
    return kept
