"""When to distrust an output: the model's own confidence in it and how unusual its input is for the
model, with thresholds calibrated on the validation split (`python -m viz_transformer calibrate`, calibration.py).

What is measured (per run, from the logits the run already holds; the model is not run again):
- mean log-probability of the output tokens (the final [end] included when the model produced it),
  under the model's full softmax, and the smallest single token probability;
- the input's pieces that are rare (seen fewer than RARE_BELOW times) or never seen in the training
  inputs (translator: the training sources; LM: the training stories), counted once with the
  project's own split and tokenizer and stored as two bit sets in meta.json;
- for a language model, the prompt's own perplexity (how surprising the model finds the prompt).

How the thresholds are chosen (`calibration.calibrate`), on the validation split (for a translator only the
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
from dataclasses import dataclass, field
from typing import Optional

import torch

from viz_transformer.run.decoding import default_new_tokens
from viz_transformer.core.batch import forward, make_batch
from viz_transformer.core.encoding import encode_input

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
    return picked_logprobs(run.logits[pos], ids)


def prompt_perplexity(run) -> Optional[float]:
    """exp(mean -log P) of an LM's prompt pieces after [begin] (None with no piece to score)."""
    ids = run.tgt_ids[1:run.prompt_len]
    if not ids:
        return None
    kept = getattr(run.logits, "next_logprobs", None)          # a RowLogits: computed in the run, block by block
    lp = kept[: len(ids)] if kept is not None else picked_logprobs(run.logits[: len(ids)], ids)
    return math.exp(-lp.mean().item())


def picked_logprobs(logits: torch.Tensor, ids: list[int], rows: int = 256) -> torch.Tensor:
    """log_softmax(logits[i])[ids[i]] for each row i, a block of rows at a time: a long text's rows times a large
    vocabulary (2,048 x 151,936 floats: 1.2 GB) are never normalised all at once, only the rows asked for."""
    ids_t = torch.tensor(ids, dtype=torch.long)
    return torch.cat([torch.log_softmax(logits[a:a + rows].float(), -1)[torch.arange(len(ids_t[a:a + rows])),
                                                                         ids_t[a:a + rows]]
                      for a in range(0, len(ids), rows)]) if ids else torch.zeros(0)


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
