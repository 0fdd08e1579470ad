"""What an intervention does to a masked-LM's prediction at a blank: the change in log p of the model's own top
piece at the text's first [MASK] (an encoder-only model generates nothing, so knock-out and patching read this).

    target = blank_target(hm, hm.run("The cat sat on the [MASK]."))    # (position, piece id), or None
    blank_logprob(hm, text, target, fwd_hooks=off) - blank_logprob(hm, text, target)   # what `off` does
    rank_heads_at_blank(hm, text)        # DataFrame, one row per head, as interventions.rank_heads
"""
from __future__ import annotations

from typing import Callable, Optional

import pandas as pd
import torch

from viz_transformer.core.hook_names import parse_prefix
from viz_transformer.run.fill_mask import mask_positions
from viz_transformer.run.interventions import Means, check_mode, all_heads, head_ablation_hooks, head_means

Target = tuple[int, int]        # (the [MASK]'s index in run.src_ids, the unablated run's top piece id there)


def blank_target(hm, run) -> Optional[Target]:
    """The first [MASK] and the run's best piece there; None without a masked-LM head or a [MASK]."""
    if not hm.cfg.is_encoder_only or hm.cfg.head != "mlm":
        return None
    positions = mask_positions(hm, run)
    if not positions:
        return None
    return positions[0], int(run.logits[positions[0]].float().argmax())


def logprob_at(logits: torch.Tensor, target: Target) -> float:
    """log p(target's piece) at target's position, from a run's logits [pos, vocab]."""
    return float(torch.log_softmax(logits[target[0]].double(), -1)[target[1]])


@torch.no_grad()
def blank_logprob(hm, text: str, target: Target, fwd_hooks=()) -> float:
    """log p(target's piece) at target's position, in one run of text with fwd_hooks active for it alone."""
    return logprob_at(hm.run(text, names_filter=lambda name: False, fwd_hooks=fwd_hooks).logits, target)


@torch.no_grad()
def rank_heads_at_blank(hm, text: str, mode: str = "zero", progress: Optional[Callable[[int, int], None]] = None,
                        means: Optional[Means] = None) -> pd.DataFrame:
    """Each head knocked out alone: delta_logprob = log p(top piece | head off) - log p(top piece), at the first
    [MASK]; output_changed = another piece is now the best there. Columns as interventions.rank_heads."""
    check_mode(mode, None, ())
    run = hm.run(text, names_filter=lambda name: False)
    target = blank_target(hm, run)
    if target is None:
        raise ValueError("ranking heads at a blank needs a masked-LM head and a [MASK] in the text")
    heads = all_heads(hm.cfg)
    if mode == "mean" and means is None:
        means = head_means(hm, text)
    base = logprob_at(run.logits, target)
    report = progress or (lambda done, n: None)
    delta, changed = [], []
    for i, head in enumerate(heads):
        off = hm.run(text, names_filter=lambda name: False, fwd_hooks=head_ablation_hooks([head], mode, means, hm.cfg))
        delta.append(logprob_at(off.logits, target) - base)
        changed.append(int(off.logits[target[0]].argmax()) != target[1])
        report(i + 1, len(heads))
    return pd.DataFrame({"block": [p for p, _ in heads], "layer": [parse_prefix(p)[1] for p, _ in heads],
                         "head": [h for _, h in heads], "delta_logprob": delta, "output_changed": changed})
