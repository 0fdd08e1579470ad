"""Decoding texts: fast batched greedy (and beam) outputs for many texts (training, evaluation), and the
step-by-step trace of one text (decode), greedy, sampled or beam search.

Text becomes ids once (core/encoding.py), generation works on ids (generation.py: the one loop; beam.py: beam
search), strings are made only for display. What a step may generate is logit_rules.py's; how a trace generates
(strategy and knobs) is one DecodeSettings (decode_settings.py).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import torch

from viz_transformer.core.config import early_stopping_rule
from viz_transformer.core.batch import make_batch, start_cache
from viz_transformer.core.hooks import hooks_active
from viz_transformer.core.encoding import ModelInput, check_decoding, encode_input
from viz_transformer.core.model import Transformer
from viz_transformer.core.tokenizer import Tokenizer, source_pieces
from viz_transformer.run.beam import beam_search
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.generation import candidates, generate, pattern_names
from viz_transformer.run.logit_rules import never_generated
from viz_transformer.run.trace import Step, Trace


def greedy_outputs(model: Transformer, inputs: Sequence[ModelInput], max_new_tokens: int,
                   banned: list[int], batch_size: int = 64) -> list[list[int]]:
    """Greedy output ids (without [end]) for encoded inputs, batched: rows whose prompts have one length
    go together (every encoder-decoder prompt is [begin]), sorted by input length (little padding), so a
    one-sequence row computes exactly what it computes alone (no padding at all)."""
    model.eval()
    results: list[list[int]] = [[] for _ in inputs]
    order = sorted(range(len(inputs)), key=lambda i: (len(inputs[i].prompt), len(inputs[i].ids)))
    groups: dict[int, list[int]] = {}
    for i in order:
        groups.setdefault(len(inputs[i].prompt), []).append(i)
    for same in groups.values():
        for b in range(0, len(same), batch_size):
            idx = same[b:b + batch_size]
            outs = generate(model, make_batch(model.cfg, [inputs[i] for i in idx]), max_new_tokens, banned)
            for i, ids in zip(idx, outs):
                results[i] = ids
    return results


@torch.no_grad()
def greedy_ids(model: Transformer, tok: Tokenizer, texts: list[str], max_new_tokens: Optional[int] = None,
               batch_size: int = 64) -> list[list[int]]:
    """Greedy output ids (without [end]) for many texts (greedy_outputs on their encoded inputs).
    max_new_tokens defaults to default_new_tokens(cfg)."""
    cfg = model.cfg
    max_new_tokens = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
    check_decoding(cfg, cfg.out_vocab, max_new_tokens)
    inputs = [encode_input(tok, cfg, t, reserve=max_new_tokens) for t in texts]
    return greedy_outputs(model, inputs, max_new_tokens, never_generated(tok), batch_size)


def default_new_tokens(cfg) -> int:
    """How many tokens a run generates unless told: 64, or a quarter of max_len if that is less
    (so an LM's default continuation never crowds out its prompt)."""
    return max(1, min(64, cfg.max_len // 4))


def greedy_batch(model: Transformer, tok: Tokenizer, texts: list[str], max_new_tokens: Optional[int] = None,
                 batch_size: int = 64) -> list[str]:
    """Greedy translations (or continuations) of many texts, as strings."""
    return [tok.decode(ids) for ids in greedy_ids(model, tok, texts, max_new_tokens, batch_size)]


@torch.no_grad()
def beam_batch(model: Transformer, tok: Tokenizer, texts: list[str], width: int = 4, length_penalty: float = 1.0,
               max_new_tokens: Optional[int] = None) -> list[str]:
    """Beam-search translations (or continuations) of many texts, as strings: the traced beam search
    (decode_input) of each text, one at a time, with greedy_batch's default length. Width 1 is greedy_batch."""
    cfg = model.cfg
    max_new_tokens = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
    check_decoding(cfg, cfg.out_vocab, max_new_tokens, beam_width=width, length_penalty=length_penalty)
    if width == 1:
        return greedy_batch(model, tok, texts, max_new_tokens)
    s = DecodeSettings("beam", max_new_tokens, beam_width=width, length_penalty=length_penalty,
                       early_stopping=early_stopping_rule(cfg.early_stopping))   # the model's own, as decode's
    return [tok.decode(decode_input(model, tok, encode_input(tok, cfg, t, reserve=max_new_tokens), s).generated_ids)
            for t in texts]


# -- step-by-step traces ------------------------------------------------------------------------

def _filter(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Sampling distribution over the vocabulary after temperature, top-k and nucleus filtering."""
    logits = logits / temperature
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, -1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p          # always keeps the most likely token
        mask = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, keep)
        probs = probs * mask
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


@torch.no_grad()
def decode(hm, text: str, settings: DecodeSettings = DecodeSettings(), *, hooks=(),
           known: Optional[Trace] = None) -> Trace:
    """Generate from `text` one token at a time and record every step.

    hm: anything with `.model` (Transformer) and `.tokenizer` (a HookedModel).
    A translator starts from [begin] after encoding the text; an LM continues [begin] + text (its
    last pieces, when the text and max_new_tokens do not both fit). settings: the strategy and its knobs; its
    None fields (max_new_tokens, beam_width, length_penalty, early_stopping) are the model config's (for an imported
    model: its generation_config.json; see new_tokens for max_new_tokens). Out-of-range settings raise ValueError
    naming the allowed range. hooks: (name, fn) pairs active for this call only (an intervened model), as
    fwd_hooks in Transformer.run_with_hooks. known: a greedy trace of this text made with the default n_candidates
    (a run's own, `Run.trace`): a greedy call it covers is read off it (greedy_prefix) instead of generating again.
    """
    model, tok = hm.model, hm.tokenizer
    cfg = model.cfg
    n = settings.max_new_tokens
    s = settings.resolved(cfg, new_tokens(cfg, len(encode_input(tok, cfg, text, reserve=1).prompt)) if n is None else n)
    enc = encode_input(tok, cfg, text, reserve=s.max_new_tokens)
    if known is not None and s.strategy == "greedy" and s.n_candidates == 5 and not hooks:
        got = greedy_prefix(known, cfg, enc, s.max_new_tokens)
        if got is not None:
            return got
    return decode_input(model, tok, enc, s, hooks=hooks)


def new_tokens(cfg, prompt_len: int) -> int:
    """How many tokens decode generates unless told: the config's max_new_tokens (less the ids an encoder-decoder's
    prompt holds after its start token, which generate() forces and counts as new), else its max_length less the
    decoder's prompt (as Hugging Face counts max_length), else 40; always at least 1 and within max_len."""
    forced = prompt_len - 1 if cfg.is_encoder_decoder else 0
    n = cfg.max_new_tokens - forced if cfg.max_new_tokens else (cfg.max_length - prompt_len if cfg.max_length else 40)
    return max(1, min(n, cfg.max_len - prompt_len))


@torch.no_grad()
def decode_input(model: Transformer, tok: Tokenizer, inp: ModelInput, s: DecodeSettings, *, hooks=(),
                 past: Optional[tuple] = None) -> Trace:
    """`decode` on an already encoded input (core/encoding.encode_input). s: with max_new_tokens set; beam search
    also reads beam_width, length_penalty and early_stopping, so a beam's settings come resolved
    (DecodeSettings.resolved: no None left, values checked). past: the prompt already read (generate's past; not
    for beam)."""
    strategy = s.strategy
    model.eval()
    cfg = model.cfg
    banned = never_generated(tok)
    src = list(inp.src) if inp.src is not None else None
    trace = Trace(strategy, source_pieces(tok, src) if src else None, tok.pieces(list(inp.prompt)), n_cut=inp.n_cut,
                  cut_at=inp.cut_at, src_ids=src, prompt_ids=list(inp.prompt), eos_id=cfg.eos_id,
                  stop_ids=tuple(cfg.stop_ids))
    batch = make_batch(cfg, [inp])
    max_new_tokens = max(0, min(s.max_new_tokens, cfg.max_len - len(inp.prompt)))
    if strategy == "beam":
        if past is not None:
            raise ValueError("beam search reads the prompt itself: it takes no past")
        with hooks_active(model.resolve_hooks(hooks)):
            return beam_search(model, tok, start_cache(model, batch), list(inp.prompt), trace, max_new_tokens, s, banned)
    gen = torch.Generator().manual_seed(s.seed)
    shown: list[torch.Tensor] = []

    def pick(logits):
        probs = torch.softmax(logits[0], -1) if strategy == "greedy" else _filter(logits[0], s.temperature, s.top_k,
                                                                                  s.top_p)
        shown.append(probs)
        nxt = int(probs.argmax()) if strategy == "greedy" else int(torch.multinomial(probs, 1, generator=gen))
        return torch.tensor([nxt])

    def record(t, logits, nxt, rows):
        i, probs = int(nxt[0]), shown[-1]
        trace.steps.append(Step(t, i, tok.piece(i), float(probs[i]), candidates(tok, probs, s.n_candidates),
                                {k: v[0] for k, v in rows.items()}))
    generate(model, batch, max_new_tokens, banned, pick, record, pattern_names(cfg), hooks, past)
    return trace


def greedy_prefix(trace: Trace, cfg, inp: ModelInput, max_new_tokens: int) -> Optional[Trace]:
    """The greedy trace of `inp` for max_new_tokens steps, read off `trace`, a greedy trace of the same input
    that ran longer (a run's own, `Run.trace`): greedy decoding is deterministic and a step does not depend
    on how many follow, so its first steps are the shorter trace's steps. None when it cannot be read off:
    another strategy or input, a model that forces [end] at the last step, or fewer steps than asked for
    in a trace that did not end."""
    ended = bool(trace.steps) and trace.steps[-1].token_id in (trace.eos_id, *trace.stop_ids)
    same = trace.prompt_ids == list(inp.prompt) and trace.src_ids == (list(inp.src) if inp.src is not None else None)
    if trace.strategy != "greedy" or cfg.forced_eos or not same or (len(trace.steps) < max_new_tokens and not ended):
        return None
    return dataclasses.replace(trace, steps=trace.steps[:max_new_tokens])
