"""Whether a given output is an input's greedy output, read off one teacher-forced forward instead of decoding it
token by token: greedy decoding picks, at every step, the most likely allowed id after the ids before it, and the
forward gives every step's logits at once.

    greedy_checked(model, moved_input, run.output_ids, 64, banned)   # run.output_ids, or None: decode it instead

The order test uses it where it expects the output not to change (the input's pieces permuted in a model without
positions): the expectation is checked, not assumed.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from viz_transformer.core.batch import forward, make_batch
from viz_transformer.core.encoding import ModelInput
from viz_transformer.run.logit_rules import allowed_logits, stop_ids


@torch.no_grad()
def greedy_checked(model, inp: ModelInput, candidate: Sequence[int], max_new_tokens: int, banned: list[int],
                   fwd_hooks=()) -> Optional[list[int]]:
    """`candidate` (output ids, without [end]) if it is the greedy output of inp under fwd_hooks (generate's rules:
    the never-generated ids left out; a row ends at an end id, or after the steps generate would take), checked in one
    forward that teacher-forces it; else None. Also None for a model whose steps read more than their logits (a
    repetition penalty, an [end] forced at the last step): decode those. The same choice as decoding, to the float
    rounding between a forward and a cached step."""
    cfg = model.cfg
    steps = max(0, min(max_new_tokens, cfg.max_len - len(inp.prompt)))
    if cfg.repetition_penalty != 1.0 or cfg.forced_eos or len(candidate) > steps:
        return None
    ended = len(candidate) < steps                         # then the step after the last id must pick an end id
    batch = make_batch(cfg, [inp], [list(candidate)])
    start, n = len(inp.prompt) - 1, len(candidate) + int(ended)
    if n == 0:
        return []
    at = torch.zeros(batch.dec.shape, dtype=torch.bool)
    at[0, start:start + n] = True                         # row start + t predicts output id t
    logits, _ = forward(model, batch, fwd_hooks, logits_at=at)
    picks = allowed_logits(logits.float().cpu(), banned).argmax(-1).tolist()
    if picks[:len(candidate)] != list(candidate) or (ended and picks[-1] not in stop_ids(cfg)):
        return None
    return list(candidate)
