"""Decoding: fast batched greedy translation (training/evaluation) and step-by-step traces.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Optional

import torch

from .hooks import hooks_active
from .model import KVCache, Transformer
from .tokenizer import Tokenizer


@torch.no_grad()
def greedy_batch(model: Transformer, tok: Tokenizer, texts: list[str], max_new_tokens: int = 64,
                 batch_size: int = 64) -> list[str]:
    """Translate (encoder-decoder) or continue (decoder-only) many texts greedily, with a KV cache."""
    model.eval()
    cfg = model.cfg
    results: list[str] = [""] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        if not cfg.is_encoder_decoder:
            for i in idx:   # prompts differ in length; decode one at a time
                results[i] = continue_text(model, tok, texts[i], max_new_tokens)
            continue
        enc = [fit_source(tok, cfg, texts[i])[0] for i in idx]
        S = max(len(e) for e in enc)
        src = torch.full((len(idx), S), cfg.pad_id, dtype=torch.long)
        for r, e in enumerate(enc):
            src[r, : len(e)] = torch.tensor(e)
        cache = model.new_cache(src)
        cur = torch.full((len(idx), 1), cfg.bos_id, dtype=torch.long)
        out = [[] for _ in idx]
        done = torch.zeros(len(idx), dtype=torch.bool)
        for _ in range(min(max_new_tokens, cfg.max_len - 1)):
            logits = model.decode(cur, cache=cache)[:, -1]
            nxt = logits.argmax(-1)
            for r in range(len(idx)):
                if not done[r] and nxt[r].item() != cfg.eos_id:
                    out[r].append(nxt[r].item())
            done |= nxt == cfg.eos_id
            if done.all():
                break
            cur = nxt.unsqueeze(1)
        for r, i in enumerate(idx):
            results[i] = tok.decode(out[r])
    return results


def continue_text(model: Transformer, tok: Tokenizer, text: str, max_new_tokens: int = 64) -> str:
    """Greedy continuation of a decoder-only model: the greedy trace, without its [end]."""
    trace = decode(SimpleNamespace(model=model, tokenizer=tok), text, "greedy", max_new_tokens)
    return tok.decode(trace.output_ids)


def require_text(text: str) -> None:
    if not text or not text.strip():
        raise ValueError("the text is empty: type a sentence first")


def fit_source(tok: Tokenizer, cfg, text: str) -> tuple[list[int], int]:
    """Encoder input for a text: its pieces cut to max_len - 1, then [end]. Returns (ids, pieces cut)."""
    ids, room = tok.encode(text), cfg.max_len - 1
    return ids[:room] + [cfg.eos_id], max(0, len(ids) - room)


def fit_prompt(tok: Tokenizer, cfg, text: str, max_new_tokens: int) -> tuple[list[int], int]:
    """Decoder-only prompt: [begin] + the text's pieces, cut so that max_new_tokens still fit
    (at least one piece is kept). Returns (ids, pieces cut)."""
    ids, room = tok.encode(text), max(1, cfg.max_len - 1 - max_new_tokens)
    return [cfg.bos_id] + ids[:room], max(0, len(ids) - room)


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
    n_cut: int = 0
    beam_history: Optional[list[list[Beam]]] = None   # beam search: the beams after every step,
                                                      # also the steps after the best one ended

    @property
    def output_ids(self) -> list[int]:
        return [s.token_id for s in self.steps]

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
    logits = logits / max(temperature, 1e-6)
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


def _attention_names(model: Transformer) -> list[str]:
    names = [f"decoder.{i}.self_attn.hook_pattern" for i in range(model.cfg.n_decoder_layers)]
    if model.cfg.is_encoder_decoder:
        names += [f"decoder.{i}.cross_attn.hook_pattern" for i in range(model.cfg.n_decoder_layers)]
    return names


def _step_logits(model: Transformer, ids: torch.Tensor, cache: KVCache):
    """One decoder call capturing each attention block's last query row: (logits [B, V], rows)."""
    rows: dict[str, torch.Tensor] = {}

    def grab(x, hook):
        rows[hook.name] = x[:, :, -1, :].detach().cpu().clone()          # (B, nh, k)
    with hooks_active([(n, grab) for n in _attention_names(model)]):
        logits = model.decode(ids, cache=cache)[:, -1]
    return logits, rows


@torch.no_grad()
def decode(hm, text: str, strategy: str = "greedy", max_new_tokens: int = 40, temperature: float = 1.0,
           top_k: int = 0, top_p: float = 1.0, seed: int = 0, beam_width: int = 4,
           length_penalty: float = 1.0, n_candidates: int = 5) -> Trace:
    """Generate from `text` one token at a time and record every step.

    hm: anything with `.model` (Transformer) and `.tokenizer` (a HookedModel).
    A translator starts from [begin] after encoding the text; an LM continues [begin] + text.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    require_text(text)
    model, tok = hm.model.eval(), hm.tokenizer
    cfg = model.cfg
    if cfg.is_encoder_decoder:
        src_ids, n_cut = fit_source(tok, cfg, text)
        cache = model.new_cache(torch.tensor([src_ids]))
        prompt = [cfg.bos_id]
        trace = Trace(strategy, tok.pieces(src_ids), tok.pieces(prompt), n_cut=n_cut)
    else:
        prompt, n_cut = fit_prompt(tok, cfg, text, max_new_tokens)
        cache = model.new_cache(prefix_len=len(prompt) if cfg.architecture == "prefix_lm" else None)
        trace = Trace(strategy, None, tok.pieces(prompt), n_cut=n_cut)
    max_new_tokens = max(0, min(max_new_tokens, cfg.max_len - len(prompt)))
    if strategy == "beam":
        return _beam(model, tok, cache, prompt, trace, max_new_tokens, beam_width, length_penalty, n_candidates)

    gen = torch.Generator().manual_seed(seed)
    cur = torch.tensor([prompt])
    for t in range(max_new_tokens):
        logits, rows = _step_logits(model, cur, cache)
        if strategy == "greedy":
            probs = torch.softmax(logits[0], -1)
            nxt = int(probs.argmax())
        else:
            probs = _filter(logits[0], temperature, top_k, top_p)
            nxt = int(torch.multinomial(probs, 1, generator=gen))
        trace.steps.append(Step(t, nxt, tok.piece(nxt), float(probs[nxt]), _candidates(tok, probs, n_candidates),
                                {k: v[0] for k, v in rows.items()}))
        if nxt == cfg.eos_id:
            break
        cur = torch.tensor([[nxt]])
    return trace


def _beam(model, tok, cache, prompt, trace, max_new_tokens, width, length_penalty, n_candidates) -> Trace:
    """Beam search. Each hypothesis carries its own history of rows and candidates, so the
    final trace's steps follow the best hypothesis while `beams` shows every beam per step."""
    eos = model.cfg.eos_id
    width = max(1, int(width))
    alive = [{"tokens": [], "score": 0.0, "rows": [], "cands": [], "probs": []}]
    alive_pos = [-1]                 # where each alive hypothesis sits in the previous step's beams
    finished = []
    beams_per_step: list[list[Beam]] = []
    cur = torch.tensor([prompt])

    def norm(h):
        return h["score"] / (max(1, len(h["tokens"])) ** length_penalty)

    for t in range(max_new_tokens):
        logits, rows = _step_logits(model, cur, cache)
        logp = torch.log_softmax(logits, -1)                                  # (nb, V)
        total = torch.tensor([h["score"] for h in alive]).unsqueeze(1) + logp
        top = torch.topk(total.flatten(), min(2 * width, total.numel()))
        V = logp.shape[-1]
        nxt_alive, parents, nxt_pos, step_beams = [], [], [], []
        for rank, (score, flat) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
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
