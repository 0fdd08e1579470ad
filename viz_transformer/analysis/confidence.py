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

The warning's job (a translator; measured by `benchmarks/bench_warning.py` on the test split): catch the outputs a
reader should not trust, sentence chrF against the reference under BAD_CHRF or a repeated word 3-gram, and leave the
good ones (chrF at least GOOD_CHRF) alone. Besides the thresholds above it flags, whatever the model's confidence:
- an output that repeats a word 3-gram (a loop: "take an umbrella tomorrow, ... take an umbrella tomorrow"); a
  language model's, a word 4-gram (stories repeat shorter phrases on their own);
- an input with a character the vocabulary lacks, read as its UTF-8 bytes (饺 -> 3 byte pieces): the model has never
  seen that character as one piece and almost never translates it (SentencePiece models; a byte-level BPE splits
  characters by design);
- a translation cut at the length limit (no [end]; a language model's continuation stops there by design);
- a translator's output that a logistic classifier over FEATURES scores above its threshold, fitted on the
  validation split's good and bad outputs; the threshold flags as many validation good ones as it can while the
  Wilson upper bound (one-sided 90%) of its false-alarm rate stays at most GOAL_FALSE_ALARMS: a rate measured on a
  few hundred outputs is itself uncertain, and the bound keeps the rate on new text under the goal
  (calibration.fit_classifier).
"""
from __future__ import annotations

import base64
import math
import re
from statistics import NormalDist
from dataclasses import dataclass, field
from typing import Optional

import torch

from viz_transformer.analysis import piece_labels
from viz_transformer.run.decoding import default_new_tokens
from viz_transformer.core.batch import forward, make_batch
from viz_transformer.core.encoding import encode_input

RARE_BELOW = 5          # a piece seen fewer times than this in the training inputs is "rare"
BAR_BLEU = 10.0         # corpus BLEU under which a set of outputs is "almost useless"
MIN_FLAGGED = 20        # the fewest validation outputs that may set tau
INPUT_QUANTILE = 0.99   # translator input: more rare pieces than this quantile of validation sources
LM_QUANTILE = 0.95      # LM: prompt perplexity above / output mean log-prob below this tail
KEY = "confidence"      # meta.json key
BAD_CHRF, GOOD_CHRF = 25.0, 60.0    # sentence chrF: under it an output is bad, from it good (between: neither)
REPEAT_N = 3            # a translation that repeats a word n-gram is looping
REPEAT_N_LM = 4         # a story that does: the smallest n at which en-stories' held-out stories' own next 64
#                         pieces repeat in under 5% (3: 24 of 100, 4: 4 of 100; its greedy outputs: 98, 91)
GOAL_FALSE_ALARMS = 0.05           # the classifier flags at most this share of good outputs, with 90% confidence
CONFIDENCE_Z = NormalDist().inv_cdf(0.9)   # one-sided 90%: the validation split's good outputs are a sample (~350)
FEATURES = ("mean_logprob", "min_logprob", "share_unsure", "length_ratio", "source_length", "mean_entropy",
            "max_entropy", "min_margin", "mean_margin")


# -- piece statistics of the training inputs --------------------------------------------------------
def _bits(ids: set, n: int) -> str:
    b = bytearray((n + 7) // 8)
    for i in ids:
        b[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(b)).decode("ascii")


def unbits(s: str) -> set:
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
    reasons: list[str] = field(default_factory=list)   # why flagged: repetition, unknown_characters, cut_off,
    #                                                     classifier or low_confidence, rare_input, long_input, unusual_prompt
    calibrated: bool = False    # meta.json holds thresholds for this model
    repeat: Optional[str] = None        # the first word n-gram the output repeats
    byte_chars: list = field(default_factory=list)     # [(character, byte pieces)] the vocabulary lacks
    cut: bool = False           # the output stopped at the length limit, without [end]
    score: Optional[float] = None       # the classifier's score (flagged above its threshold); None: no classifier

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


def _classified(hm) -> bool:
    return bool((hm.meta.get(KEY) or {}).get("classifier")) and hm.cfg.is_translator


def assess(hm, run) -> Confidence:
    """The confidence line of one run, flagged against the thresholds in the model's meta.json."""
    ended = run.trace is None or bool(run.trace.steps and run.trace.steps[-1].token_id == hm.cfg.eos_id)
    lp = token_logprobs(run, hm.cfg)
    rows = None
    if _classified(hm):
        rows = spread(run.logits[torch.arange(run.prompt_len - 1, run.prompt_len - 1 + len(lp))])
    return _confidence(hm, lp, input_ids(run, hm.cfg), None if hm.cfg.is_translator else prompt_perplexity(run),
                       run.output, ended, rows)


def assess_ids(hm, text: str, out_ids: list[int], ended: bool) -> Confidence:
    """`assess` for an output that is not the run's own (a sampled or beam-search trace): one
    teacher-forced forward of the text and those ids. ended: the output finished with [end]."""
    lp, ppl, src, rows = batch_scores(hm, [text], [list(out_ids)], ended=[ended], token_lp=True, spreads=True)[0]
    return _confidence(hm, lp, src, ppl, hm.tokenizer.decode(out_ids), ended, rows if _classified(hm) else None)


def repeated_ngram(text: str, n: int = REPEAT_N) -> Optional[str]:
    """The first word n-gram that occurs twice in `text` (case and punctuation ignored), or None."""
    words = re.findall(r"\w+(?:['’]\w+)*", text.lower())
    seen = set()
    for i in range(len(words) - n + 1):
        gram = " ".join(words[i:i + n])
        if gram in seen:
            return gram
        seen.add(gram)
    return None


def byte_characters(tok, src: list[int]) -> list[tuple[str, int]]:
    """The input's characters its SentencePiece vocabulary lacks, read as byte pieces: [(character, pieces)]."""
    sp = getattr(tok, "sp", None)
    if piece_labels.tokenizer_kind(tok) != "sentencepiece" or sp is None:
        return []
    return piece_labels.byte_read_characters([sp.id_to_piece(int(i)) for i in src])


def spread(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(entropy of each row's distribution in nats, the gap between its two largest log-probabilities): [n], [n].
    `logits`: the rows that predicted the output tokens, [n, vocab]."""
    if not len(logits):
        return torch.zeros(0), torch.zeros(0)
    lp = torch.log_softmax(logits.float(), -1)
    top = lp.topk(min(2, lp.shape[-1]), -1).values
    gap = top[:, 0] - top[:, 1] if top.shape[-1] > 1 else torch.full((len(lp),), math.inf)
    return -(lp.exp() * lp).sum(-1), gap


def features(lp: torch.Tensor, entropy: torch.Tensor, margin: torch.Tensor, n_src: int) -> list[float]:
    """FEATURES of one output from its tokens' log-probabilities, its rows' entropies and top-two gaps, and the
    input's length in pieces: the mean and least log-probability, the share of tokens below probability 0.5,
    log(output / input length), log input length, the mean and largest entropy, the least and mean gap."""
    n = len(lp)
    if not n:
        return [-10.0, -10.0, 1.0, math.log(1 / (n_src + 1)), math.log(n_src + 1), 10.0, 10.0, 0.0, 0.0]
    return [lp.mean().item(), lp.min().item(), (lp < math.log(0.5)).float().mean().item(),
            math.log((n + 1) / (n_src + 1)), math.log(n_src + 1), entropy.mean().item(), entropy.max().item(),
            margin.min().item(), margin.mean().item()]


def classifier_score(clf: dict, x: list[float]) -> float:
    """The logistic classifier's log-odds that an output is bad: standardised features, weights, bias."""
    return sum(w * (v - m) / s for w, v, m, s in zip(clf["weights"], x, clf["mean"], clf["std"])) + clf["bias"]


def _confidence(hm, lp: torch.Tensor, src: list[int], ppl: Optional[float], output: str = "",
                ended: bool = True, rows: Optional[tuple] = None) -> Confidence:
    cal = hm.meta.get(KEY) or {}
    n_rare = n_unseen = 0
    if cal.get("pieces"):
        seen, common = _pieces(cal["pieces"]["seen"]), _pieces(cal["pieces"]["common"])
        n_unseen = sum(i not in seen for i in src)
        n_rare = sum(i not in common for i in src)
    c = Confidence(lp.mean().item() if len(lp) else float("nan"), lp.exp().min().item() if len(lp) else float("nan"),
                   len(lp), len(src), n_rare, n_unseen, ppl, calibrated=bool(cal.get("thresholds")),
                   repeat=repeated_ngram(output, REPEAT_N if hm.cfg.is_translator else REPEAT_N_LM),
                   byte_chars=byte_characters(hm.tokenizer, src), cut=hm.cfg.is_translator and not ended)
    clf = cal.get("classifier") if hm.cfg.is_translator else None
    if clf and rows is not None:
        c.score = classifier_score(clf, features(lp, *rows, len(src)))
    c.reasons = verdict(c, cal.get("thresholds") or {}, clf)
    return c


_CACHE: dict[str, set] = {}


def _pieces(bits: str) -> set:
    if bits not in _CACHE:
        _CACHE[bits] = unbits(bits)
    return _CACHE[bits]


def verdict(c: Confidence, th: dict, clf: Optional[dict] = None) -> list[str]:
    """Why an output should not be trusted (none: no reason): what needs no threshold (a loop, a character read as
    bytes, an output cut at the limit), then the classifier when there is one, else the mean log-probability's
    threshold, then the input's."""
    out = []
    if c.repeat:
        out.append("repetition")
    if c.byte_chars:
        out.append("unknown_characters")
    if c.cut:
        out.append("cut_off")
    if clf is not None and c.score is not None:
        if c.score > clf["threshold"]:
            out.append("classifier")
    elif "mean_logprob" in th and c.n_tokens and c.mean_logprob < th["mean_logprob"]:
        out.append("low_confidence")
    if ("rare_pieces" in th and c.n_rare > th["rare_pieces"]) or ("unseen_pieces" in th and c.n_unseen > th["unseen_pieces"]):
        out.append("rare_input")
    if "longest_input" in th and c.n_pieces > th["longest_input"]:
        out.append("long_input")
    if "prompt_ppl" in th and c.prompt_ppl is not None and c.prompt_ppl > th["prompt_ppl"]:
        out.append("unusual_prompt")
    return out


# -- in words, for the command line (the app says the same through its string tables) ----------------
def line(c: Confidence) -> str:
    """'confidence: mean log-prob −0.21 (p≈0.81 per token) · 0 of 7 pieces rare', as the app's line."""
    n = c.n_pieces
    rare = f"{c.n_rare} of {n} {'piece' if n == 1 else 'pieces'} rare"
    s = (f"confidence: mean log-prob {_minus(c.mean_logprob)} (p≈{c.per_token:.2f} per token) · {rare}" if c.n_tokens
         else f"confidence: no output token to score · {rare}")
    if c.prompt_ppl is not None:
        s += f" · prompt perplexity {c.prompt_ppl:,.1f}"
    if c.byte_chars:
        k = len(c.byte_chars)
        s += f" · {k} {'character' if k == 1 else 'characters'} read as bytes"
    return s


def reasons_text(c: Confidence, cal: dict) -> list[str]:
    """Each reason of a flagged output in words, as the app's warning gives them."""
    th, clf, out = cal.get("thresholds") or {}, cal.get("classifier") or {}, []
    for r in c.reasons:
        if r == "repetition":
            out.append(f"it repeats itself (“{c.repeat}” comes twice): a loop")
        elif r == "unknown_characters":
            out += [f"{ch} is not in this model's vocabulary: it reads it as {n} {'byte' if n == 1 else 'bytes'}, "
                    "which it almost never translates" for ch, n in c.byte_chars]
        elif r == "cut_off":
            out.append("it stopped at the length limit without finishing")
        elif r == "classifier":
            out.append(f"its probabilities look like those of the validation outputs that were wrong (mean log-prob "
                       f"{_minus(c.mean_logprob)}, least likely token p={c.min_prob:.2f}: the check's score "
                       f"{c.score:.2f} is above the threshold {clf['threshold']:.2f})")
        elif r == "low_confidence":
            out.append(f"the model itself is unsure of it (mean log-prob {_minus(c.mean_logprob)}, below "
                       f"{_minus(th['mean_logprob'])})")
        elif r == "rare_input":
            out.append(f"{c.n_rare} of the input's {c.n_pieces} pieces are rare in its training data "
                       f"({c.n_unseen} never seen)")
        elif r == "long_input":
            out.append(f"the input has {c.n_pieces} pieces, longer than anything it was trained on "
                       f"(at most {th['longest_input']})")
        elif r == "unusual_prompt":
            out.append(f"the prompt is unlike the stories it learned from (perplexity {c.prompt_ppl:,.0f}, above "
                       f"{th['prompt_ppl']:,.0f})")
    return out


def warning_line(c: Confidence, cal: dict) -> Optional[str]:
    """The app's warning of a flagged output in one line (None when nothing is flagged)."""
    return "warning: don't trust this output too much: " + "; ".join(reasons_text(c, cal)) + "." if c.flagged else None


def as_dict(c: Confidence, cal: dict) -> dict:
    """The assessment as plain JSON values (the command line's --json)."""
    return {"mean_logprob": None if math.isnan(c.mean_logprob) else round(c.mean_logprob, 4),
            "per_token": None if not c.n_tokens else round(c.per_token, 4), "n_tokens": c.n_tokens,
            "n_pieces": c.n_pieces, "n_rare": c.n_rare, "n_unseen": c.n_unseen, "prompt_ppl": c.prompt_ppl,
            "bytes": [{"character": ch, "pieces": n} for ch, n in c.byte_chars], "repeat": c.repeat, "cut": c.cut,
            "score": None if c.score is None else round(c.score, 4), "flagged": c.flagged, "reasons": c.reasons,
            "why": reasons_text(c, cal), "calibrated": c.calibrated}


def _minus(x: float) -> str:
    return f"{x:.2f}".replace("-", "−")


# -- many outputs at once (calibration) ---------------------------------------------------------------
@torch.no_grad()
def batch_scores(hm, texts: list[str], outs: list[list[int]], max_new_tokens: Optional[int] = None,
                 batch_size: int = 64, ended: Optional[list[bool]] = None, token_lp: bool = False,
                 spreads: bool = False):
    """(mean log-prob, prompt perplexity or None, input ids) per text for its output ids, one
    teacher-forced forward per padded batch; equals `assess` on each text's own run. ended: whether
    each output finished with [end] (default: greedy_ids' outputs, shorter than max_new_tokens allowed);
    token_lp: the first item is every token's log-prob [n] instead of their mean; spreads: a fourth item, the
    rows' (entropy, top-two gap) of `spread`."""
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
            if spreads:
                res[i] += (spread(logits[r, P - 1:P - 1 + len(ids)]),)
    return res
