"""Held-out scores: BLEU/chrF for translators, perplexity for language models, fill-in accuracy for masked LMs.

Splits are rebuilt from each checkpoint's meta.json (data, seed, sizes). Several translators are
scored on exactly the same pairs: the first one's split minus every pair whose source any of
them trained on, so no model is rewarded for remembering a training sentence. A corpus of one's own
(`evaluate --corpus FILE`) is scored whole. The translations and a language model's summed loss are the
parts a Ray worker computes for its run (`evaluate --ray`: translations, lm_nll); the scores come from all of
them together, as here.
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


def translations(hm, sources, beam_width: int = 1, length_penalty: float = 1.0,
                 max_new_tokens: Optional[int] = None) -> list[str]:
    """The model's translations of `sources`, in their order: greedy (greedy_batch's batches of 64), or beam search."""
    return beam_batch(hm.model, hm.tokenizer, list(sources), beam_width, length_penalty, max_new_tokens)


def score_translation(model, tok, pairs, limit=None, max_new_tokens=None, beam_width: int = 1,
                      length_penalty: float = 1.0, keep_translations: bool = False, hyps=None) -> dict:
    """Corpus BLEU and chrF (sacrebleu) of the model's translations of `pairs`: greedy, or beam search when
    beam_width > 1 (then the result says so). keep_translations: the translations too, in the pairs' order
    ("translations", a list of strings). hyps: the translations, made already (on Ray)."""
    import sacrebleu
    pairs = pairs[:limit] if limit else pairs
    if hyps is None:
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
def loss_sums(model, blocks: torch.Tensor, batch_size: int = 16) -> tuple[float, int]:
    """(summed negative log-likelihood, tokens scored) of a language model over `blocks` [n, block + 1]."""
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
    return nll, n


def lm_perplexity(model, blocks: torch.Tensor, batch_size: int = 16) -> float:
    return perplexity([loss_sums(model, blocks, batch_size)])


def lm_nll(hm, blocks: torch.Tensor) -> tuple[float, int]:
    """loss_sums of a loaded checkpoint: what a Ray worker computes for its run of blocks."""
    return loss_sums(hm.model, blocks)


def perplexity(sums) -> float:
    """exp(mean loss) from (nll, tokens) sums, of one run or of many added up."""
    nll, n = sum(a for a, _ in sums), sum(b for _, b in sums)
    return math.exp(nll / max(n, 1))


def on_ray(address: Optional[str], workers: Optional[int], beam_width: int = 1, length_penalty: float = 1.0):
    """(translate, nll) for evaluate_translators and evaluate_lm, computed by Ray workers (run/ray_pool.py): the
    sources in runs of whole greedy batches (64) and the blocks in runs of whole batches (16), so each worker makes
    the batches the local run makes."""
    from viz_transformer.run.ray_pool import map_runs

    def translate(hm, sources):
        got = map_runs(hm.path, "viz_transformer.training.evaluation:translations", list(sources), 64, address,
                       workers, beam_width=beam_width, length_penalty=length_penalty)
        return [h for _, run in got for h in run]

    def nll(hm, blocks):
        got = map_runs(hm.path, "viz_transformer.training.evaluation:lm_nll", list(blocks), 16, address, workers,
                       pack=torch.stack)
        return [sums for _, sums in got]
    return translate, nll


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
                         keep_translations: bool = False, pairs=None, translate=None) -> list[dict]:
    """One result per model, all on the same held-out pairs, all decoded alike (greedy, or beam search);
    keep_translations: each result holds its model's translations too (score_translation). pairs: a corpus of
    one's own instead, scored whole (split "corpus"). translate(hm, sources) -> translations: where they are
    made (default: here, `translations`)."""
    if pairs is not None:
        items, dropped, split = list(pairs), 0, "corpus"
    else:
        items, dropped = common_heldout(hms, split, data)
    items = items[:limit] if limit else items
    translate = translate or (lambda hm, sources: translations(hm, sources, beam_width, length_penalty))
    out = []
    for hm in hms:
        res = (score_translation(hm.model, hm.tokenizer, items, beam_width=beam_width, length_penalty=length_penalty,
                                 keep_translations=keep_translations, hyps=translate(hm, [s for s, _ in items]))
               if items else {"bleu": None, "chrf": None, "n": 0})
        res.update(split=split)
        if pairs is None:
            by = [("source" if h.meta.get("split") == "by_source" else "pair") for h in hms]
            res.update(unseen_sources_only=True, split_by=by[0], n_dropped_seen=dropped)
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


def evaluate_lm(hm, data: Optional[str] = None, limit: Optional[int] = None, stories=None, nll=None) -> dict:
    """Perplexity on the validation stories its training cut (or `stories`, a corpus of one's own: split
    "corpus"), in blocks of its training length. nll(hm, blocks) -> [(nll, tokens), ...]: where the loss is
    summed (default: here, lm_nll)."""
    m = hm.meta
    split = "corpus" if stories is not None else "val"
    if stories is None:
        _, stories, _ = story_splits(m, data)
    size = m.get("train_config", {}).get("block_size", 256)
    stream = D.token_stream(list(stories), hm.tokenizer)
    if len(stream) <= size:
        raise ValueError(f"the text holds {len(stream)} tokens; a language model is scored on blocks of {size + 1}")
    blocks = D.blocks(stream, size)
    sums = (nll or (lambda h, b: [lm_nll(h, b)]))(hm, blocks[:limit])
    return {"perplexity": round(perplexity(sums), 3), "split": split}


def evaluate_masked_lm(hm, split: str = "test", data: Optional[str] = None, limit: Optional[int] = None,
                       pairs=None) -> dict:
    """A masked LM's fill-in accuracy (masked_lm.fill_scores: one blank per sentence, each language apart) on the
    held-out split of the pairs it trained on, rebuilt from meta.json (or `pairs`, a corpus of one's own)."""
    from viz_transformer.training.masked_lm import fill_scores
    if pairs is not None:
        return {**fill_scores(hm.model, hm.tokenizer, list(pairs), limit), "split": "corpus"}
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
