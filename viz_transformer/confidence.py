"""When to distrust an output: the model's own confidence in it and how unusual its input is for the
model, with thresholds calibrated on the validation split (`python -m viz_transformer calibrate`).

What is measured (per run, from the logits the run already holds; the model is not run again):
- mean log-probability of the output tokens (the final [end] included when the model produced it),
  under the model's full softmax, and the smallest single token probability;
- the input's pieces that are rare (seen fewer than RARE_BELOW times) or never seen in the training
  inputs (translator: the training sources; LM: the training stories), counted once with the
  project's own split and tokenizer and stored as two bit sets in meta.json;
- for a language model, the prompt's own perplexity (how surprising the model finds the prompt).

How the thresholds are chosen (`calibrate`), on the validation split (for a translator only the
pairs whose source is not a training source), greedy outputs as the app shows them:
- translator, output: tau = the largest mean log-probability such that the validation outputs
  below it, taken together, score under BAR_BLEU (10) corpus BLEU, "almost useless" on the usual
  BLEU reading (<10 almost useless, 10-19 hard to get the gist, 20-29 the gist is clear ...);
  at least MIN_FLAGGED outputs, so a handful of sentences cannot set it. Flagged = below tau.
- translator, input: flagged when it has more rare pieces than INPUT_QUANTILE (99%) of the validation
  sources, more never-seen pieces than any validation source (none has one on the shipped models),
  or more pieces than any training source (never seen that long).
- language model (no reference to score against): the prompt is unusual above the validation
  prompts' 95th percentile of perplexity; the output is unsure below the 5th percentile of the
  validation continuations' mean log-probability.
The calibration also records the test BLEU of flagged and unflagged outputs, so the app can quote it.
"""
from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass, field
from typing import Optional

import torch

from . import data as D
from .decoding import default_new_tokens, greedy_ids
from .batch import forward, make_batch
from .inputs import encode_input

RARE_BELOW = 5          # a piece seen fewer times than this in the training inputs is "rare"
BAR_BLEU = 10.0         # corpus BLEU under which a set of outputs is "almost useless"
MIN_FLAGGED = 20        # the fewest validation outputs that may set tau
INPUT_QUANTILE = 0.99   # translator input: more rare pieces than this quantile of validation sources
LM_QUANTILE = 0.95      # LM: prompt perplexity above / output mean log-prob below this tail
KEY = "confidence"      # meta.json key


# -- piece statistics of the training inputs --------------------------------------------------------
def _bits(ids: set, n: int) -> str:
    b = bytearray((n + 7) // 8)
    for i in ids:
        b[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(b)).decode("ascii")


def _unbits(s: str) -> set:
    b = base64.b64decode(s)
    return {i * 8 + k for i, byte in enumerate(b) for k in range(8) if byte >> k & 1}


def piece_stats(tok, inputs: list[str]) -> dict:
    """Which pieces the training inputs contain at all ("seen") and at least RARE_BELOW times
    ("common"), as base64 bit sets over the vocabulary (about 1 kB each), and the longest input."""
    counts: dict[int, int] = {}
    longest = 0
    for text in inputs:
        ids = tok.encode(text)
        longest = max(longest, len(ids))
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
    n = tok.vocab_size
    return {"rare_below": RARE_BELOW, "longest_input": longest, "n_inputs": len(inputs),
            "seen": _bits(set(counts), n), "common": _bits({i for i, c in counts.items() if c >= RARE_BELOW}, n)}


# -- one output -------------------------------------------------------------------------------------
@dataclass
class Confidence:
    mean_logprob: float         # mean log P(token) over the output tokens (nan: no token)
    min_prob: float             # the least likely output token's probability
    n_tokens: int               # output tokens scored ([end] included when generated)
    n_pieces: int               # input pieces (source, or the LM's prompt)
    n_rare: int                 # ... seen fewer than RARE_BELOW times in training (unseen included)
    n_unseen: int               # ... never seen in training
    prompt_ppl: Optional[float] = None   # LM: the prompt's perplexity
    reasons: list[str] = field(default_factory=list)   # why flagged: low_confidence, rare_input, long_input, unusual_prompt
    calibrated: bool = False    # meta.json holds thresholds for this model

    @property
    def flagged(self) -> bool:
        return bool(self.reasons)

    @property
    def per_token(self) -> float:
        """exp(mean log-prob): the geometric-mean probability per token."""
        return math.exp(self.mean_logprob) if self.n_tokens else float("nan")


def input_ids(run, cfg) -> list[int]:
    """The text's own pieces of a run: the source (translator) or the prompt (LM), no specials."""
    return _strip(run.input.ids, cfg)


def _strip(ids, cfg) -> list[int]:
    return [i for i in ids if i not in (cfg.pad_id, cfg.bos_id, cfg.eos_id, cfg.sep_id)]


def scored_ids(run, cfg) -> list[int]:
    """The output ids whose probabilities are scored: the output, then [end] if the model produced it
    (a given target counts as complete, so its [end] is scored too)."""
    ended = run.trace is None or bool(run.trace.steps and run.trace.steps[-1].token_id == cfg.eos_id)
    return list(run.output_ids) + ([cfg.eos_id] if ended else [])


def token_logprobs(run, cfg) -> torch.Tensor:
    """log P(token) of each scored output token, from the run's own teacher-forced logits: [n]."""
    ids = scored_ids(run, cfg)[: run.logits.shape[0] - run.prompt_len + 1]
    pos = torch.arange(run.prompt_len - 1, run.prompt_len - 1 + len(ids))
    return torch.log_softmax(run.logits.float(), -1)[pos, torch.tensor(ids, dtype=torch.long)]


def prompt_perplexity(run) -> Optional[float]:
    """exp(mean -log P) of an LM's prompt pieces after [begin] (None with no piece to score)."""
    ids = run.tgt_ids[1:run.prompt_len]
    if not ids:
        return None
    lp = torch.log_softmax(run.logits[: len(ids)].float(), -1)[torch.arange(len(ids)), torch.tensor(ids)]
    return math.exp(-lp.mean().item())


def assess(hm, run) -> Confidence:
    """The confidence line of one run, flagged against the thresholds in the model's meta.json."""
    return _confidence(hm, token_logprobs(run, hm.cfg), input_ids(run, hm.cfg),
                       None if hm.cfg.is_translator else prompt_perplexity(run))


def assess_ids(hm, text: str, out_ids: list[int], ended: bool) -> Confidence:
    """`assess` for an output that is not the run's own (a sampled or beam-search trace): one
    teacher-forced forward of the text and those ids. ended: the output finished with [end]."""
    lp, ppl, src = batch_scores(hm, [text], [list(out_ids)], ended=[ended], token_lp=True)[0]
    return _confidence(hm, lp, src, ppl)


def _confidence(hm, lp: torch.Tensor, src: list[int], ppl: Optional[float]) -> Confidence:
    cal = hm.meta.get(KEY) or {}
    n_rare = n_unseen = 0
    if cal.get("pieces"):
        seen, common = _pieces(cal["pieces"]["seen"]), _pieces(cal["pieces"]["common"])
        n_unseen = sum(i not in seen for i in src)
        n_rare = sum(i not in common for i in src)
    c = Confidence(lp.mean().item() if len(lp) else float("nan"), lp.exp().min().item() if len(lp) else float("nan"),
                   len(lp), len(src), n_rare, n_unseen, ppl, calibrated=bool(cal.get("thresholds")))
    c.reasons = verdict(c, cal.get("thresholds") or {})
    return c


_CACHE: dict[str, set] = {}


def _pieces(bits: str) -> set:
    if bits not in _CACHE:
        _CACHE[bits] = _unbits(bits)
    return _CACHE[bits]


def verdict(c: Confidence, th: dict) -> list[str]:
    """Why an output should not be trusted, by the calibrated thresholds (none: no reason)."""
    out = []
    if "mean_logprob" in th and c.n_tokens and c.mean_logprob < th["mean_logprob"]:
        out.append("low_confidence")
    if ("rare_pieces" in th and c.n_rare > th["rare_pieces"]) or ("unseen_pieces" in th and c.n_unseen > th["unseen_pieces"]):
        out.append("rare_input")
    if "longest_input" in th and c.n_pieces > th["longest_input"]:
        out.append("long_input")
    if "prompt_ppl" in th and c.prompt_ppl is not None and c.prompt_ppl > th["prompt_ppl"]:
        out.append("unusual_prompt")
    return out


# -- many outputs at once (calibration) ---------------------------------------------------------------
@torch.no_grad()
def batch_scores(hm, texts: list[str], outs: list[list[int]], max_new_tokens: Optional[int] = None,
                 batch_size: int = 64, ended: Optional[list[bool]] = None, token_lp: bool = False):
    """(mean log-prob, prompt perplexity or None, input ids) per text for its output ids, one
    teacher-forced forward per padded batch; equals `assess` on each text's own run. ended: whether
    each output finished with [end] (default: greedy_ids' outputs, shorter than max_new_tokens allowed);
    token_lp: the first item is every token's log-prob [n] instead of their mean."""
    max_new_tokens = default_new_tokens(hm.cfg) if max_new_tokens is None else max_new_tokens
    model, tok, cfg = hm.model, hm.tokenizer, hm.cfg
    inputs = [encode_input(tok, cfg, t, reserve=max_new_tokens) for t in texts]
    res = [None] * len(texts)
    for b in range(0, len(texts), batch_size):
        idx = list(range(b, min(b + batch_size, len(texts))))
        prompts = [list(inputs[i].prompt) for i in idx]
        logits, _ = forward(model, make_batch(cfg, [inputs[i] for i in idx], [outs[i] for i in idx]))
        lp = torch.log_softmax(logits.float(), -1)                                     # (B, T, V)
        for r, i in enumerate(idx):
            P, out = len(prompts[r]), outs[i]
            end = len(out) < min(max_new_tokens, cfg.max_len - P) if ended is None else ended[i]
            ids = out + ([cfg.eos_id] if end else [])
            t = lp[r, torch.arange(P - 1, P - 1 + len(ids)), torch.tensor(ids, dtype=torch.long)]
            ppl = None
            if not cfg.is_translator and P > 1:
                ppl = math.exp(-lp[r, torch.arange(P - 1), torch.tensor(prompts[r][1:])].mean().item())
            src = _strip(inputs[i].ids, cfg)
            res[i] = (t if token_lp else t.mean().item() if len(t) else float("nan"), ppl, src)
    return res


def _bleu_stats(hyps, refs):
    from sacrebleu.metrics import BLEU
    bleu = BLEU()
    return bleu, bleu._extract_corpus_statistics(hyps, [refs])


def corpus_bleu(hyps, refs) -> Optional[float]:
    import sacrebleu
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) if hyps else None


def choose_tau(scores: list[float], hyps: list[str], refs: list[str], bar: float = BAR_BLEU,
               min_n: int = MIN_FLAGGED) -> tuple[float, int]:
    """(tau, how many validation outputs fall below it): the largest mean log-prob such that every
    output below it, together, scores under `bar` corpus BLEU (at least min_n of them); -inf if none."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    bleu, stats = _bleu_stats([hyps[i] for i in order], [refs[i] for i in order])
    acc, best = [0] * len(stats[0]), 0
    for k, s in enumerate(stats, 1):
        acc = [a + x for a, x in zip(acc, s)]
        if k >= min_n and k < len(order) and bleu._compute_score_from_stats(acc).score < bar:
            best = k
    if best == 0:
        return float("-inf"), 0
    lo, hi = scores[order[best - 1]], scores[order[best]]
    return (lo + hi) / 2, best


def _quantile(xs: list[float], q: float) -> float:
    return float(torch.quantile(torch.tensor(xs, dtype=torch.float64), q))


def calibrate(hm, data: Optional[str] = None, limit: Optional[int] = None, log=print) -> dict:
    """The meta.json block for a checkpoint: piece statistics, thresholds, how they were chosen, and
    (translators) the test BLEU of flagged and unflagged outputs. `limit`: the first N items of each split."""
    from .evaluation import translation_splits
    tok, cfg, meta = hm.tokenizer, hm.cfg, hm.meta
    n_new = default_new_tokens(cfg)
    if not cfg.is_translator:
        return _calibrate_lm(hm, data, limit, log)
    train, val, test = translation_splits(meta, data)
    val, _ = D.unseen_sources(val, train)
    test, _ = D.unseen_sources(test, train)
    val, test = val[:limit] if limit else val, test[:limit] if limit else test
    pieces = piece_stats(tok, sorted({s for s, _ in train}))
    common, seen = _unbits(pieces["common"]), _unbits(pieces["seen"])
    by_split = {}
    for name, pairs in (("val", val), ("test", test)):
        texts = [s for s, _ in pairs]
        outs = greedy_ids(hm.model, tok, texts, n_new)
        scores = batch_scores(hm, texts, outs, n_new)
        by_split[name] = ([tok.decode(o) for o in outs], [t for _, t in pairs], scores)
        log(f"{hm.name}: {name} split, {len(pairs)} outputs scored")
    hyps, refs, scores = by_split["val"]
    tau, n_low = choose_tau([s[0] for s in scores], hyps, refs)
    rare = [sum(i not in common for i in s[2]) for s in scores]
    th = {"mean_logprob": round(tau, 4), "rare_pieces": math.floor(_quantile(rare, INPUT_QUANTILE)),
          "unseen_pieces": max(sum(i not in seen for i in s[2]) for s in scores),
          "longest_input": pieces["longest_input"]}
    report = {}
    for name, (hyps, refs, scores) in by_split.items():
        flags = [bool(verdict(Confidence(s[0], 0, 1, len(s[2]), sum(i not in common for i in s[2]),
                                         sum(i not in seen for i in s[2])), th)) for s in scores]
        f = [i for i, x in enumerate(flags) if x]
        u = [i for i, x in enumerate(flags) if not x]
        report[name] = {"flagged": {"bleu": corpus_bleu([hyps[i] for i in f], [refs[i] for i in f]), "n": len(f)},
                        "unflagged": {"bleu": corpus_bleu([hyps[i] for i in u], [refs[i] for i in u]), "n": len(u)},
                        "all": {"bleu": corpus_bleu(hyps, refs), "n": len(hyps)}}
    how = (f"greedy outputs of {len(val)} validation pairs whose source is not a training source: mean_logprob is "
           f"the largest mean log-probability such that the {n_low} outputs below it together score under "
           f"{BAR_BLEU:g} corpus BLEU; rare_pieces is the {INPUT_QUANTILE:.0%} quantile of the validation sources' "
           f"number of pieces seen fewer than {RARE_BELOW} times in training sources, unseen_pieces the most "
           f"never-seen pieces in a validation source; longest_input is the longest "
           f"training source in pieces. An output is flagged when any threshold is crossed.")
    return {"thresholds": th, "how": how, "command": _command(hm, limit), "pieces": pieces, **report}


def _first_sentence(story: str) -> str:
    m = re.match(r"(.+?[.!?])(\s|$)", story, re.S)
    return (m.group(1) if m else story[:80]).strip()


def _calibrate_lm(hm, data, limit, log) -> dict:
    """An LM's thresholds: the validation stories' first sentences as prompts (see the module doc)."""
    meta, tok, cfg = hm.meta, hm.tokenizer, hm.cfg
    data = data or meta.get("data")
    train, val, _ = D.split(D.read_stories(data), meta.get("split_seed", 1234), meta.get("n_test", 0),
                            meta.get("n_val", 100))
    val = val[:limit] if limit else val
    pieces = piece_stats(tok, train)
    n_new = default_new_tokens(cfg)
    prompts = [_first_sentence(s) for s in val]
    outs = greedy_ids(hm.model, tok, prompts, n_new)
    scores = batch_scores(hm, prompts, outs, n_new, batch_size=16)
    log(f"{hm.name}: {len(prompts)} validation prompts continued and scored")
    th = {"mean_logprob": round(_quantile([s[0] for s in scores], 1 - LM_QUANTILE), 4),
          "prompt_ppl": round(_quantile([s[1] for s in scores], LM_QUANTILE), 2)}
    flagged = sum(bool(verdict(Confidence(s[0], 0, 1, 1, 0, 0, s[1]), th)) for s in scores)
    how = (f"the first sentence of each of {len(prompts)} validation stories as a prompt, continued greedily: "
           f"prompt_ppl is the {LM_QUANTILE:.0%} quantile of those prompts' perplexity, mean_logprob the "
           f"{1 - LM_QUANTILE:.0%} quantile of their continuations' mean log-probability. An output is "
           f"flagged when either is crossed.")
    return {"thresholds": th, "how": how, "command": _command(hm, limit), "pieces": pieces,
            "val": {"flagged": {"n": flagged}, "all": {"n": len(prompts)}}}


def _command(hm, limit) -> str:
    return f"python -m viz_transformer calibrate checkpoints/{hm.name}" + (f" --limit {limit}" if limit else "")
