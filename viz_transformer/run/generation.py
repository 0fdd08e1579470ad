"""The one token-by-token loop with a KV cache (generate), one decoder step (step_logits), and what a trace
records at each step: the new query's attention rows and the top candidates.

Every strategy generates on ids through these: greedy and sampling through generate, beam search (beam.py)
through step_logits.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from viz_transformer.core.batch import Batch, model_device, start_cache
from viz_transformer.core.hook_names import decoder_blocks, hook_name
from viz_transformer.core.hooks import hooks_active
from viz_transformer.core.model import KVCache, Transformer
from viz_transformer.core.tokenizer import Tokenizer
from viz_transformer.run.logit_rules import allowed_logits, only_forced, penalise_repeats, stop_ids
from viz_transformer.run.trace import Candidate


def _pick_greedy(logits: torch.Tensor) -> torch.Tensor:
    return logits.argmax(-1)


@torch.no_grad()
def generate(model: Transformer, batch: Batch, max_new_tokens: int, banned: list[int], pick=_pick_greedy,
             on_step=None, watch: Sequence[str] = (), fwd_hooks=(), past: Optional[tuple] = None,
             drop_finished: bool = False) -> list[list[int]]:
    """The one token-by-token loop with a KV cache, for every row of `batch` (whose prompts have one
    length): each step feeds the new tokens and appends pick(logits [B, V]) -> ids [B] (default: the
    argmax, greedy), with the never-generated ids at -inf. A row stops at [end]; the loop stops when every
    row has, after max_new_tokens (never past max_len), or when on_step(t, logits, ids, rows) returns
    True; rows = {name: [B, head, key]}, the last query's pattern of each hook in `watch`. Returns each
    row's generated ids, without [end]. fwd_hooks: active for the whole loop. past: (KVCache holding the whole
    prompt, the raw logits [B, V] of its last position, rows {name: [B, head, key]} of `watch` there), from a
    forward that already read the prompt (a lean run's capture, run/lean_once.py): the loop starts from it
    instead of reading the prompt again. drop_finished: a row leaves the batch (and its KV cache) once it has
    ended, so the others do not carry it to the longest one's end; on_step still sees every row, an ended one's
    logits -inf, id -1 and pattern rows zero."""
    cfg = model.cfg
    batch = batch.to(model_device(model))
    stops = torch.tensor(stop_ids(cfg), device=batch.dec.device)
    with hooks_active(model.resolve_hooks(fwd_hooks)):
        cache, cur = (start_cache(model, batch) if past is None else past[0]), batch.dec
        seen = batch.dec                                      # every decoder id so far (repetition penalty)
        out: list[list[int]] = [[] for _ in range(len(batch))]
        done = [False] * len(batch)
        live = list(range(len(batch)))                        # the batch rows still decoding (all, unless dropped)
        steps = max(0, min(max_new_tokens, cfg.max_len - cur.shape[1]))
        for t in range(steps):
            if t == 0 and past is not None:
                logits, rows = allowed_logits(past[1], banned), {n: past[2][n] for n in watch}
            else:
                logits, rows = step_logits(model, cur, cache, banned, watch)
            logits = penalise_repeats(logits, seen, cfg.repetition_penalty)
            if cfg.forced_eos and t == steps - 1:                 # the last token allowed is [end] (or the forced id)
                logits = only_forced(logits, cfg)
            nxt = pick(logits)
            if on_step is not None and on_step(t, *_every_row(live, len(batch), logits, nxt, rows)):
                break
            ended = torch.isin(nxt, stops).tolist()
            for j, i in enumerate(nxt.tolist()):
                r = live[j]
                if not done[r] and not ended[j]:
                    out[r].append(i)
                done[r] = done[r] or ended[j]
            if all(done):
                break
            cur = nxt.unsqueeze(1)
            seen = torch.cat([seen, cur], 1)
            if drop_finished and any(done[r] for r in live):
                keep = [j for j, r in enumerate(live) if not done[r]]
                index = torch.tensor(keep, device=cur.device)
                cache.reorder(index)
                cur, seen, live = cur[index], seen[index], [live[j] for j in keep]
    return out


def _every_row(live: list[int], n: int, logits: torch.Tensor, ids: torch.Tensor, rows: dict) -> tuple:
    """A step's (logits, ids, rows) for the `live` rows, widened to all n rows of the batch (those dropped:
    logits -inf, id -1, pattern rows zero); as they are when every row is live."""
    if len(live) == n:
        return logits, ids, rows
    at = torch.tensor(live)
    wide_logits = torch.full((n, *logits.shape[1:]), float("-inf"), dtype=logits.dtype, device=logits.device)
    wide_ids = torch.full((n,), -1, dtype=ids.dtype, device=ids.device)
    wide_logits[at.to(logits.device)], wide_ids[at.to(ids.device)] = logits, ids
    wide = {}
    for name, x in rows.items():
        wide[name] = torch.zeros((n, *x.shape[1:]), dtype=x.dtype)
        wide[name][at] = x
    return wide_logits, wide_ids, wide


def step_logits(model: Transformer, ids: torch.Tensor, cache: KVCache, banned: list[int], watch: Sequence[str] = ()):
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


def pattern_names(cfg) -> list[str]:
    """Every decoder attention block's hook_pattern: what a trace records at each step."""
    return [hook_name(b, i, "hook_pattern") for b in decoder_blocks(cfg) for i in range(cfg.n_decoder_layers)]


def candidates(tok: Tokenizer, probs: torch.Tensor, k: int) -> list[Candidate]:
    """The k most likely ids of probs [V] with a probability above 0, most likely first."""
    p, i = torch.topk(probs, min(k, probs.shape[-1]))
    return [Candidate(int(a), tok.piece(int(a)), float(b)) for a, b in zip(i, p) if b > 0]
