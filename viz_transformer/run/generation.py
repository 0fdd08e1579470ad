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
                logits, rows = step_logits(model, cur, cache, banned, watch)
            logits = penalise_repeats(logits, seen, cfg.repetition_penalty)
            if cfg.forced_eos and t == steps - 1:                 # the last token allowed is [end] (or the forced id)
                logits = only_forced(logits, cfg)
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
