"""Decoding on ids: fast batched greedy translation (training, evaluation) and step-by-step traces.

Text becomes ids once (inputs.py), generation works on ids, strings are made only for display.
[pad], [unk] and [begin] are never generated: every strategy masks them out of the distribution
(a generated [pad] would silently become a masked key).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import torch

from viz_transformer.core.config import early_stopping_rule
from viz_transformer.core.batch import Batch, make_batch, model_device, start_cache
from viz_transformer.core.hooks import hooks_active
from viz_transformer.core.encoding import ModelInput, check_decoding, encode_input
from viz_transformer.core.model import KVCache, Transformer
from viz_transformer.core.hook_names import decoder_blocks, hook_name
from viz_transformer.core.tokenizer import Tokenizer, source_pieces
from viz_transformer.run.decode_settings import STRATEGIES, DecodeSettings  # noqa: F401  (decoding.STRATEGIES: its old home)
from viz_transformer.run.trace import Beam, Candidate, Step, Trace


def never_generated(tok: Tokenizer) -> list[int]:
    """Ids no strategy may choose: [pad], [unk], [begin]; for an imported model (its tokenizer says
    bans_specials = False) only its generation_config's single-token bad_words_ids, as Hugging Face's
    generate does."""
    if not getattr(tok, "bans_specials", True):
        return list(getattr(tok, "banned", []))
    return sorted(i for i in {tok.pad_id, tok.unk_id, tok.bos_id} if i >= 0)


def allowed_logits(logits: torch.Tensor, banned: list[int]) -> torch.Tensor:
    """Logits [..., V] with the never-generated ids at -inf (so softmax gives them 0)."""
    if not banned:
        return logits
    return logits.index_fill(-1, torch.tensor(banned, dtype=torch.long, device=logits.device), float("-inf"))


def _pick_greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(-1)


@torch.no_grad()
def generate(model: Transformer, batch: Batch, max_new_tokens: int, banned: list[int], pick=_pick_greedy,
             on_step=None, watch: Sequence[str] = (), fwd_hooks=(), past: Optional[tuple] = None) -> list[list[int]]:
    """The one token-by-token loop with a KV cache, for every row of `batch` (whose prompts have one
    length): each step feeds the new tokens and appends pick(logits [B, V]) -> ids [B] (default: the
    argmax, greedy), with the never-generated ids at -inf. A row stops at [end]; the loop stops when every
    row has, after max_new_tokens (never past max_len), or when on_step(t, logits, ids, rows) returns
    True; rows = {name: [B, head, key]}, the last query's pattern of each hook in `watch`. Returns each
    row's generated ids, without [end]. fwd_hooks: active for the whole loop. past: (KVCache holding the whole
    prompt, the raw logits [B, V] of its last position, rows {name: [B, head, key]} of `watch` there), from a
    forward that already read the prompt (a lean run's capture, run/lean_once.py): the loop starts from it
    instead of reading the prompt again."""
    cfg = model.cfg
    batch = batch.to(model_device(model))
    stops = torch.tensor(stop_ids(cfg), device=batch.dec.device)
    with hooks_active(model.resolve_hooks(fwd_hooks)):
        cache, cur = (start_cache(model, batch) if past is None else past[0]), batch.dec
        seen = batch.dec                                      # every decoder id so far (repetition penalty)
        out: list[list[int]] = [[] for _ in range(len(batch))]
        done = [False] * len(batch)
        steps = max(0, min(max_new_tokens, cfg.max_len - cur.shape[1]))
        for t in range(steps):
            if t == 0 and past is not None:
                logits, rows = allowed_logits(past[1], banned), {n: past[2][n] for n in watch}
            else:
                logits, rows = _step_logits(model, cur, cache, banned, watch)
            logits = penalise_repeats(logits, seen, cfg.repetition_penalty)
            if cfg.forced_eos and t == steps - 1:                 # the last token allowed is [end] (or the forced id)
                logits = torch.full_like(logits, float("-inf")).index_fill(
                    -1, torch.tensor([forced_id(cfg)], device=logits.device), 0.0)
            nxt = pick(logits)
            if on_step is not None and on_step(t, logits, nxt, rows):
                break
            ended = torch.isin(nxt, stops).tolist()
            for r, i in enumerate(nxt.tolist()):
                if not done[r] and not ended[r]:
                    out[r].append(i)
            done = [d or e for d, e in zip(done, ended)]
            if all(done):
                break
            cur = nxt.unsqueeze(1)
            seen = torch.cat([seen, cur], 1)
    return out


def forced_id(cfg) -> int:
    """The id a forced_eos config forces at the length limit: [end], or the folder's forced_eos_token_id when it is
    another id (transformers' ForcedEOSTokenLogitsProcessor forces it whatever the end id is)."""
    return cfg.forced_eos_id if cfg.forced_eos_id >= 0 else cfg.eos_id


def stop_ids(cfg) -> list[int]:
    """The ids that end a generation: [end], and an imported model's other end-of-sequence ids."""
    return [cfg.eos_id, *cfg.stop_ids]


def penalise_repeats(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """A generation config's repetition_penalty, as Hugging Face applies it: the logit of every id already in the
    sequence (prompt included) divided by the penalty, or multiplied when it is negative. logits [B, V], seen [B, T]."""
    if penalty == 1.0:
        return logits
    score = logits.gather(-1, seen)
    return logits.scatter(-1, seen, torch.where(score < 0, score * penalty, score / penalty))


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
    (decode_ids) of each text, one at a time, with greedy_batch's default length. Width 1 is greedy_batch."""
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


def _candidates(tok: Tokenizer, probs: torch.Tensor, k: int) -> list[Candidate]:
    p, i = torch.topk(probs, min(k, probs.shape[-1]))
    return [Candidate(int(a), tok.piece(int(a)), float(b)) for a, b in zip(i, p) if b > 0]


def _step_logits(model: Transformer, ids: torch.Tensor, cache: KVCache, banned: list[int], watch: Sequence[str] = ()):
    """One decoder call: (logits [B, V] of the last position with the never-generated ids at -inf, rows
    {hook name: [B, head, key]}: the last query's row of each hook_pattern in `watch`)."""
    hooks, rows = last_rows(watch)
    last = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
    last[:, -1] = True                          # the vocabulary projection at the last position alone: a long
    with hooks_active(hooks):                                # prompt's first step is otherwise [T, vocab] (1.2 GB)
        logits = model.decode(ids, cache=cache, logits_at=last)
    return allowed_logits(logits, banned), rows


def last_rows(watch: Sequence[str]):
    """(hooks, rows): hooks that keep, in rows {hook name: [B, head, key]}, the last query's row of each hook_pattern
    in `watch` (what a trace records at each step)."""
    rows: dict[str, torch.Tensor] = {}

    def grab(x, hook):
        rows[hook.name] = x[:, :, -1, :].detach().to("cpu", torch.float32, copy=True)   # (B, nh, k)
    return [(n, grab) for n in watch], rows


def _pattern_names(cfg) -> list[str]:
    """Every decoder attention block's hook_pattern: what a trace records at each step."""
    return [hook_name(b, i, "hook_pattern") for b in decoder_blocks(cfg) for i in range(cfg.n_decoder_layers)]


@torch.no_grad()
def decode(hm, text: str, strategy: str = "greedy", max_new_tokens: Optional[int] = None, temperature: float = 1.0,
           top_k: int = 0, top_p: float = 1.0, seed: int = 0, beam_width: Optional[int] = None,
           length_penalty: Optional[float] = None, n_candidates: int = 5, fwd_hooks=(),
           early_stopping=None, known: Optional[Trace] = None, settings: Optional[DecodeSettings] = None) -> Trace:
    """Generate from `text` one token at a time and record every step.

    hm: anything with `.model` (Transformer) and `.tokenizer` (a HookedModel).
    A translator starts from [begin] after encoding the text; an LM continues [begin] + text (its
    last pieces, when the text and max_new_tokens do not both fit). Out-of-range parameters raise
    ValueError naming the allowed range. fwd_hooks: (name, fn) pairs active for this call only
    (an intervened model), as in Transformer.run_with_hooks. max_new_tokens, beam_width, length_penalty and
    early_stopping (True, False or "never", as Hugging Face's) default to the model config's (for an imported
    model: its generation_config.json; see new_tokens for max_new_tokens). known: a greedy trace of this text
    made with the default n_candidates (a run's own, `Run.trace`): a greedy call it covers is read off it
    (greedy_prefix) instead of generating again. settings: every one of strategy … n_candidates as one
    DecodeSettings, in place of those arguments.
    """
    model, tok = hm.model, hm.tokenizer
    cfg = model.cfg
    s = settings or DecodeSettings(strategy, max_new_tokens, temperature, top_k, top_p, seed, beam_width,
                                   length_penalty, early_stopping, n_candidates)
    n = s.max_new_tokens
    s = s.resolved(cfg, new_tokens(cfg, len(encode_input(tok, cfg, text, reserve=1).prompt)) if n is None else n)
    enc = encode_input(tok, cfg, text, reserve=s.max_new_tokens)
    if known is not None and s.strategy == "greedy" and s.n_candidates == 5 and not fwd_hooks:
        got = greedy_prefix(known, cfg, enc, s.max_new_tokens)
        if got is not None:
            return got
    return decode_input(model, tok, enc, s, fwd_hooks)


def new_tokens(cfg, prompt_len: int) -> int:
    """How many tokens decode generates unless told: the config's max_new_tokens, else its max_length less the
    decoder's prompt (as Hugging Face counts max_length), else 40; always at least 1 and within max_len."""
    n = cfg.max_new_tokens or (cfg.max_length - prompt_len if cfg.max_length else 40)
    return max(1, min(n, cfg.max_len - prompt_len))


def decode_ids(model: Transformer, tok: Tokenizer, inp: ModelInput, strategy: str = "greedy",
               max_new_tokens: int = 40, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
               seed: int = 0, beam_width: int = 4, length_penalty: float = 1.0, n_candidates: int = 5,
               fwd_hooks=(), early_stopping: str = "true", past: Optional[tuple] = None) -> Trace:
    """decode_input with the settings as loose arguments (its callers before DecodeSettings)."""
    return decode_input(model, tok, inp, DecodeSettings(strategy, max_new_tokens, temperature, top_k, top_p, seed,
                                                        beam_width, length_penalty, early_stopping, n_candidates),
                        fwd_hooks, past)


@torch.no_grad()
def decode_input(model: Transformer, tok: Tokenizer, inp: ModelInput, s: DecodeSettings, fwd_hooks=(),
                 past: Optional[tuple] = None) -> Trace:
    """`decode` on an already encoded input (inputs.encode_input); settings resolved and checked
    (DecodeSettings.resolved: no None left). past: the prompt already read (generate's past; not for beam)."""
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
        with hooks_active(model.resolve_hooks(fwd_hooks)):
            return _beam(model, tok, start_cache(model, batch), list(inp.prompt), trace, max_new_tokens, s, banned)
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
        trace.steps.append(Step(t, i, tok.piece(i), float(probs[i]), _candidates(tok, probs, s.n_candidates),
                                {k: v[0] for k, v in rows.items()}))
    generate(model, batch, max_new_tokens, banned, pick, record, _pattern_names(cfg), fwd_hooks, past)
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


def _beam_logp(logits: torch.Tensor, seen: torch.Tensor, cfg, banned: list[int], hf_order: bool,
               last: bool) -> torch.Tensor:
    """Each beam's next-token scores [nb, V] (log-probabilities). This project's models: the never-generated
    ids removed, then log_softmax (their probability goes to the others). An imported model, as Hugging Face's
    beam search: log_softmax of the logits, then the processors on the log-probabilities (repetition
    penalty, bad_words_ids at -inf, and at the last step allowed only [end] at 0 when forced_eos)."""
    if not hf_order:
        return torch.log_softmax(allowed_logits(logits, banned), -1)
    logp = allowed_logits(penalise_repeats(torch.log_softmax(logits, -1), seen, cfg.repetition_penalty), banned)
    if cfg.forced_eos and last:
        logp = torch.full_like(logp, float("-inf")).index_fill(-1, torch.tensor([forced_id(cfg)]), 0.0)
    return logp


def _beam(model, tok, cache, prompt, trace, max_new_tokens: int, s: DecodeSettings, banned) -> Trace:
    """Beam search with Hugging Face's rules (transformers' _beam_search): each step ranks the
    K = max(2, 1 + number of end ids) × width best continuations by their summed log-probability. Those among
    the first `width` that end (an end id, or the length limit at the last step) join the ended hypotheses,
    ranked by score / length ** length_penalty, of which the best `width` are kept; the first `width` that
    do not end run on. The search stops at the length limit, or when `width` hypotheses have ended and
    either early_stopping is "true" or the best running beam's score / L ** length_penalty cannot beat the
    worst kept one (L: its length; with "never" and a positive penalty the longest possible length).
    The answer is the best ended hypothesis. Each hypothesis carries its own history of rows and
    candidates, so the trace's steps follow the best one while `beams` shows every beam per step."""
    cfg = model.cfg
    width, length_penalty, n_candidates = s.beam_width, s.length_penalty, s.n_candidates
    early_stopping = early_stopping_rule(s.early_stopping)
    stops = set(stop_ids(cfg))
    keep = max(2, 1 + len(stops)) * width
    hf_order = not getattr(tok, "bans_specials", True)
    names = _pattern_names(cfg)
    alive = [{"tokens": [], "score": 0.0, "rows": [], "cands": [], "probs": []}]
    alive_pos = [-1]                 # where each alive hypothesis sits in the previous step's beams
    ended: list[tuple[float, dict]] = []     # (score / length ** length_penalty, hypothesis), best first
    beams_per_step: list[list[Beam]] = []
    cur = torch.tensor([prompt])

    for t in range(max_new_tokens):
        last = t == max_new_tokens - 1
        logits, rows = _step_logits(model, cur, cache, [] if hf_order else banned, names)
        seen = torch.tensor([prompt + h["tokens"] for h in alive])
        logp = _beam_logp(logits, seen, cfg, banned, hf_order, last)          # (nb, V)
        total = torch.tensor([h["score"] for h in alive]).unsqueeze(1) + logp
        top = torch.topk(total.flatten(), min(keep, total.numel()))
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
            if token in stops or last:
                if rank < width:                         # only the first `width` may end
                    ended.append((score / (t + 1) ** length_penalty, new))
                    step_beams.append(Beam(new["tokens"], tok.pieces(new["tokens"]), score, alive_pos[b],
                                           token in stops))
            elif len(nxt_alive) < width:
                nxt_alive.append(new)
                parents.append(b)
                nxt_pos.append(len(step_beams))
                step_beams.append(Beam(new["tokens"], tok.pieces(new["tokens"]), score, alive_pos[b], False))
            if len(nxt_alive) >= width and rank >= width - 1:
                break
        beams_per_step.append(step_beams)
        ended = sorted(ended, key=lambda e: -e[0])[:width]
        if last or not nxt_alive:
            break
        if len(ended) >= width:
            if early_stopping == "true":
                break
            L = max_new_tokens if early_stopping == "never" and length_penalty > 0 else t + 1
            if nxt_alive[0]["score"] / L ** length_penalty <= ended[-1][0]:     # no running beam can do better
                break
        alive, alive_pos = nxt_alive, nxt_pos
        cache.reorder(torch.tensor(parents))
        cur = torch.tensor([[h["tokens"][-1]] for h in alive])
    trace.beam_history = beams_per_step
    best = ended[0][1] if ended else alive[0]           # nothing ended: no step ran, or every id was banned
    for i, token in enumerate(best["tokens"]):
        trace.steps.append(Step(i, token, tok.piece(token), best["probs"][i], best["cands"][i],
                                best["rows"][i], beams_per_step[i] if i < len(beams_per_step) else []))
    return trace
