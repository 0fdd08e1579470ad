"""A fixed output, teacher-forced: its token probabilities, and the logits of a run's own ids on an
intervened model (what the knock-out page compares before and after).

    ids, start = output_labels(run)
    token_probabilities(forced_logits(hm, run, hooks), ids, start, never_generated(hm.tokenizer))   # [n]
"""
from __future__ import annotations

import torch

from viz_transformer.core.batch import forward
from viz_transformer.run.derived_cache import lean_rows
from viz_transformer.run.logit_rules import allowed_logits, never_generated


def token_probabilities(logits: torch.Tensor, ids, start: int, banned) -> torch.Tensor:
    """P(ids[t]) under row start + t of logits [T, vocab], with the never-generated ids at -inf
    (as every decoding strategy sees them): [len(ids)]."""
    ids = torch.as_tensor(list(ids), dtype=torch.long)
    rows = logits[start:start + len(ids)]                                       # (n, V)
    if rows.shape[0] != len(ids):
        raise ValueError(f"{len(ids)} ids from row {start} need {start + len(ids)} logit rows, not {logits.shape[0]}")
    probs = torch.softmax(allowed_logits(rows.float(), list(banned)), -1)
    return probs.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def output_labels(run) -> tuple[list[int], int]:
    """(the ids the run's decoder predicted, its [end] included when the greedy output ended with
    one; the logit row that predicts the first of them)."""
    ids = run.trace.output_ids if run.trace is not None else run.output_ids
    return list(ids), run.prompt_len - 1


def forced_logits(hm, run, fwd_hooks=()) -> torch.Tensor:
    """The logits [tgt_pos, vocab] of run's exact ids (source and decoder input) with fwd_hooks
    active: the same teacher forcing as run.logits, on an intervened model, never re-tokenized. A one-sequence
    model's as a RowLogits (run/row_logits.py): the output's rows kept, the others projected when read."""
    cfg = hm.cfg
    if cfg.is_encoder_decoder or cfg.is_encoder_only:
        return forward(hm.model, run.batch(), fwd_hooks)[0][0]
    return lean_rows(hm.model, run.batch(), fwd_hooks, lambda name: False, run.prompt_len - 1,
                     never_generated(hm.tokenizer))[0]
