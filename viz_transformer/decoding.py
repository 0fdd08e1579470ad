"""Decoding on ids: fast batched greedy translation (training, evaluation) and step-by-step traces.

Text becomes ids once (inputs.py), generation works on ids, strings are made only for display.
[pad], [unk] and [begin] are never generated: every strategy masks them out of the distribution
(a generated [pad] would silently become a masked key).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from .hooks import hooks_active
from .inputs import Encoded, check_decoding, encode_input, pad_rows
from .model import KVCache, Transformer
from .names import decoder_blocks, hook_name
from .tokenizer import Tokenizer


def never_generated(tok: Tokenizer) -> list[int]:
    """Ids no strategy may choose: [pad], [unk], [begin]."""
    return sorted(i for i in {tok.pad_id, tok.unk_id, tok.bos_id} if i >= 0)


def allowed_logits(logits: torch.Tensor, banned: list[int]) -> torch.Tensor:
    """Logits [..., V] with the never-generated ids at -inf (so softmax gives them 0)."""
    return logits.index_fill(-1, torch.tensor(banned, dtype=torch.long), float("-inf"))


@torch.no_grad()
def greedy_ids(model: Transformer, tok: Tokenizer, texts: list[str], max_new_tokens: Optional[int] = None,
               batch_size: int = 64) -> list[list[int]]:
    """Greedy output ids (without [end]) for many texts, batched with a KV cache: an encoder-decoder
    in length-sorted padded batches; a one-sequence translator in batches of prompts of equal length
    (no padding, so every row computes exactly what it computes alone); a language model one prompt
    at a time (the greedy trace). max_new_tokens defaults to default_new_tokens(cfg)."""
    model.eval()
    cfg = model.cfg
    max_new_tokens = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
    check_decoding(cfg, cfg.vocab_size, max_new_tokens)
    results: list[list[int]] = [[] for _ in texts]
    if not cfg.is_translator:
        for i, text in enumerate(texts):
            enc = encode_input(tok, cfg, text, reserve=max_new_tokens)
            results[i] = decode_ids(model, tok, enc, "greedy", max_new_tokens).generated_ids
        return results
    banned = never_generated(tok)
    encoded = [encode_input(tok, cfg, t, reserve=max_new_tokens).ids for t in texts]
    if cfg.is_encoder_decoder:
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        groups = [order[b:b + batch_size] for b in range(0, len(order), batch_size)]
    else:
        by_len: dict[int, list[int]] = {}
        for i, ids in enumerate(encoded):
            by_len.setdefault(len(ids), []).append(i)
        groups = [g[b:b + batch_size] for g in by_len.values() for b in range(0, len(g), batch_size)]
    for idx in groups:
        rows = pad_rows([encoded[i] for i in idx], cfg.pad_id)
        if cfg.is_encoder_decoder:
            cache, cur = model.new_cache(rows), torch.full((len(idx), 1), cfg.bos_id, dtype=torch.long)
        else:
            cache, cur = model.new_cache(prefix_len=rows.shape[1] if cfg.architecture == "prefix_lm" else None), rows
        done = torch.zeros(len(idx), dtype=torch.bool)
        for _ in range(max(0, min(max_new_tokens, cfg.max_len - cur.shape[1]))):
            nxt = allowed_logits(model.decode(cur, cache=cache)[:, -1], banned).argmax(-1)
            for r in range(len(idx)):
                if not done[r] and nxt[r].item() != cfg.eos_id:
                    results[idx[r]].append(nxt[r].item())
            done |= nxt == cfg.eos_id
            if done.all():
                break
            cur = nxt.unsqueeze(1)
    return results


def default_new_tokens(cfg) -> int:
    """How many tokens a run generates unless told: 64, or a quarter of max_len if that is less
    (so an LM's default continuation never crowds out its prompt)."""
    return max(1, min(64, cfg.max_len // 4))


def greedy_batch(model: Transformer, tok: Tokenizer, texts: list[str], max_new_tokens: Optional[int] = None,
                 batch_size: int = 64) -> list[str]:
    """Greedy translations (or continuations) of many texts, as strings."""
    return [tok.decode(ids) for ids in greedy_ids(model, tok, texts, max_new_tokens, batch_size)]


# -- step-by-step traces ------------------------------------------------------------------------
STRATEGIES = ("greedy", "sample", "beam")


@dataclass
class Candidate:
    id: int
    piece: str
    prob: float


@dataclass
class Beam:
    tokens: list[int]        # generated ids so far (without [begin])
    pieces: list[str]
    score: float             # sum of log-probabilities
    parent: int              # index of the beam it extends in the previous step's list (-1 at start)
    finished: bool = False   # ended with [end] at this step


@dataclass
class Step:
    index: int
    token_id: int
    piece: str
    prob: float                          # probability of the chosen token under the shown distribution
    candidates: list[Candidate]          # top-k of that distribution, most likely first
    attention: dict[str, torch.Tensor]   # hook name -> [head, key_pos]: the new query's row
    beams: Optional[list[Beam]] = None   # beam search: every beam after this step


@dataclass
class Trace:
    strategy: str
    src_pieces: Optional[list[str]]      # encoder input (translator) or None
    prompt_pieces: list[str]             # decoder input before the first step: [begin] (+ text for an LM)
    steps: list[Step] = field(default_factory=list)
    n_cut: int = 0                       # pieces of the text dropped to fit max_len ...
    cut_at: str = "end"                  # ... at its "end" (translator) or its "start" (LM), inputs.Encoded
    beam_history: Optional[list[list[Beam]]] = None   # beam search: the beams after every step,
                                                      # also the steps after the best one ended
    src_ids: Optional[list[int]] = None  # ids of src_pieces
    prompt_ids: list[int] = field(default_factory=list)   # ids of prompt_pieces
    eos_id: Optional[int] = None

    @property
    def output_ids(self) -> list[int]:
        """Every chosen id, including a final [end]."""
        return [s.token_id for s in self.steps]

    @property
    def generated_ids(self) -> list[int]:
        """The output without a final [end]: what a captured run teacher-forces."""
        ids = self.output_ids
        return ids[:-1] if ids and ids[-1] == self.eos_id else ids

    @property
    def pieces(self) -> list[str]:
        """Decoder tokens: the prompt then every chosen piece (including a final [end])."""
        return self.prompt_pieces + [s.piece for s in self.steps]

    def pattern(self, name: str) -> torch.Tensor:
        """Stack the per-step rows of `name` into [head, step, key], zero-padded on the right."""
        rows = [s.attention[name] for s in self.steps]
        K = max(r.shape[-1] for r in rows)
        out = torch.zeros(rows[0].shape[0], len(rows), K)
        for i, r in enumerate(rows):
            out[:, i, : r.shape[-1]] = r
        return out


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


def _candidates(tok: Tokenizer, probs: torch.Tensor, k: int) -> list[Candidate]:
    p, i = torch.topk(probs, min(k, probs.shape[-1]))
    return [Candidate(int(a), tok.piece(int(a)), float(b)) for a, b in zip(i, p) if b > 0]


def _step_logits(model: Transformer, ids: torch.Tensor, cache: KVCache, banned: list[int]):
    """One decoder call capturing each attention block's last query row: (logits [B, V] with the
    never-generated ids at -inf, rows {hook name: [B, head, key]})."""
    rows: dict[str, torch.Tensor] = {}
    names = [hook_name(b, i, "hook_pattern") for b in decoder_blocks(model.cfg) for i in range(model.cfg.n_decoder_layers)]

    def grab(x, hook):
        rows[hook.name] = x[:, :, -1, :].detach().cpu().clone()          # (B, nh, k)
    with hooks_active([(n, grab) for n in names]):
        logits = model.decode(ids, cache=cache)[:, -1]
    return allowed_logits(logits, banned), rows


@torch.no_grad()
def decode(hm, text: str, strategy: str = "greedy", max_new_tokens: int = 40, temperature: float = 1.0,
           top_k: int = 0, top_p: float = 1.0, seed: int = 0, beam_width: int = 4,
           length_penalty: float = 1.0, n_candidates: int = 5, fwd_hooks=()) -> Trace:
    """Generate from `text` one token at a time and record every step.

    hm: anything with `.model` (Transformer) and `.tokenizer` (a HookedModel).
    A translator starts from [begin] after encoding the text; an LM continues [begin] + text (its
    last pieces, when the text and max_new_tokens do not both fit). Out-of-range parameters raise
    ValueError naming the allowed range. fwd_hooks: (name, fn) pairs active for this call only
    (an intervened model), as in Transformer.run_with_hooks.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    model, tok = hm.model, hm.tokenizer
    check_decoding(model.cfg, model.cfg.vocab_size, max_new_tokens, temperature, top_k, top_p, beam_width,
                   length_penalty, n_candidates, seed)
    enc = encode_input(tok, model.cfg, text, reserve=max_new_tokens)
    return decode_ids(model, tok, enc, strategy, max_new_tokens, temperature, top_k, top_p, seed, beam_width,
                      length_penalty, n_candidates, fwd_hooks)


@torch.no_grad()
def decode_ids(model: Transformer, tok: Tokenizer, enc: Encoded, strategy: str = "greedy",
               max_new_tokens: int = 40, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
               seed: int = 0, beam_width: int = 4, length_penalty: float = 1.0, n_candidates: int = 5,
               fwd_hooks=()) -> Trace:
    """`decode` on an already encoded input (inputs.encode_input); parameters already checked."""
    model.eval()
    cfg = model.cfg
    banned = never_generated(tok)
    with hooks_active(model.resolve_hooks(fwd_hooks)):
        if cfg.is_encoder_decoder:
            cache = model.new_cache(torch.tensor([enc.ids]))
            prompt = [cfg.bos_id]
            trace = Trace(strategy, tok.pieces(enc.ids), tok.pieces(prompt), n_cut=enc.n_cut, cut_at=enc.cut_at,
                          src_ids=list(enc.ids), prompt_ids=prompt, eos_id=cfg.eos_id)
        else:
            prompt = list(enc.ids)
            cache = model.new_cache(prefix_len=len(prompt) if cfg.architecture == "prefix_lm" else None)
            trace = Trace(strategy, None, tok.pieces(prompt), n_cut=enc.n_cut, cut_at=enc.cut_at,
                          prompt_ids=prompt, eos_id=cfg.eos_id)
        max_new_tokens = max(0, min(max_new_tokens, cfg.max_len - len(prompt)))
        if strategy == "beam":
            return _beam(model, tok, cache, prompt, trace, max_new_tokens, beam_width, length_penalty,
                         n_candidates, banned)
        gen = torch.Generator().manual_seed(seed)
        cur = torch.tensor([prompt])
        for t in range(max_new_tokens):
            logits, rows = _step_logits(model, cur, cache, banned)
            if strategy == "greedy":
                probs = torch.softmax(logits[0], -1)
                nxt = int(probs.argmax())
            else:
                probs = _filter(logits[0], temperature, top_k, top_p)
                nxt = int(torch.multinomial(probs, 1, generator=gen))
            trace.steps.append(Step(t, nxt, tok.piece(nxt), float(probs[nxt]),
                                    _candidates(tok, probs, n_candidates), {k: v[0] for k, v in rows.items()}))
            if nxt == cfg.eos_id:
                break
            cur = torch.tensor([[nxt]])
    return trace


def _beam(model, tok, cache, prompt, trace, max_new_tokens, width, length_penalty, n_candidates, banned) -> Trace:
    """Beam search. Each hypothesis carries its own history of rows and candidates, so the
    final trace's steps follow the best hypothesis while `beams` shows every beam per step."""
    eos = model.cfg.eos_id
    alive = [{"tokens": [], "score": 0.0, "rows": [], "cands": [], "probs": []}]
    alive_pos = [-1]                 # where each alive hypothesis sits in the previous step's beams
    finished = []
    beams_per_step: list[list[Beam]] = []
    cur = torch.tensor([prompt])

    def norm(h):
        return h["score"] / (max(1, len(h["tokens"])) ** length_penalty)

    for t in range(max_new_tokens):
        logits, rows = _step_logits(model, cur, cache, banned)
        logp = torch.log_softmax(logits, -1)                                  # (nb, V)
        total = torch.tensor([h["score"] for h in alive]).unsqueeze(1) + logp
        top = torch.topk(total.flatten(), min(2 * width, total.numel()))
        V = logp.shape[-1]
        nxt_alive, parents, nxt_pos, step_beams = [], [], [], []
        for rank, (score, flat) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
            if score == float("-inf"):                   # a never-generated id: nothing further is possible
                break
            b, token = divmod(flat, V)
            h = alive[b]
            new = {"tokens": h["tokens"] + [token], "score": score,
                   "rows": h["rows"] + [{k: v[b] for k, v in rows.items()}],
                   "cands": h["cands"] + [_candidates(tok, logp[b].exp(), n_candidates)],
                   "probs": h["probs"] + [float(logp[b, token].exp())]}
            if token == eos:
                if rank < width:                         # [end] counts only among the top `width`
                    finished.append(new)
                    step_beams.append(Beam(new["tokens"], tok.pieces(new["tokens"]), score, alive_pos[b], True))
            elif len(nxt_alive) < width:
                nxt_alive.append(new)
                parents.append(b)
                nxt_pos.append(len(step_beams))
                step_beams.append(Beam(new["tokens"], tok.pieces(new["tokens"]), score, alive_pos[b], False))
            if len(nxt_alive) >= width and rank >= width - 1:
                break
        beams_per_step.append(step_beams)
        if len(finished) >= width or not nxt_alive:
            break
        alive, alive_pos = nxt_alive, nxt_pos
        cache.reorder(torch.tensor(parents))
        cur = torch.tensor([[h["tokens"][-1]] for h in alive])
    trace.beam_history = beams_per_step
    # stopped by the length limit before `width` beams finished: unfinished beams compete too
    best = max(finished if len(finished) >= width else finished + alive, key=norm)
    for i, token in enumerate(best["tokens"]):
        trace.steps.append(Step(i, token, tok.piece(token), best["probs"][i], best["cands"][i],
                                best["rows"][i], beams_per_step[i] if i < len(beams_per_step) else []))
    return trace
