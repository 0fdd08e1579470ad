"""The masks page's reference masks, a prefix LM's layout of a sentence, and scores as softmax sees them
after the mask (built from viz_transformer.core.masks)."""
from __future__ import annotations

import torch

from viz_transformer.core.masks import causal_mask, padding_mask, prefix_lm_mask


def example_masks(T: int, prefix_len: int, ids=None, pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Reference masks of size [T, T] (True = may attend) built from viz_transformer.core.masks."""
    out = {"causal": causal_mask(T)[0, 0], "prefix_lm": prefix_lm_mask(T, prefix_len)[0, 0]}
    if ids is not None:
        out["padding"] = padding_mask(torch.as_tensor(ids).view(1, -1), pad_id)[0, 0].expand(T, -1)
    return out


def prefix_lm_layout(run, sep: str = "[sep]") -> tuple[list[str], int]:
    """(pieces, prefix length) of the run's sentence as a prefix LM sees it: one sequence [begin] +
    source + [sep] + target, whose prefix is [begin] + source + [sep]. A one-sequence run is already
    laid out so (its prompt is the prefix); an encoder-decoder run's source (without [end]) and decoder
    input are joined."""
    if run.src_pieces is None:
        return list(run.tgt_pieces), run.prompt_len
    src = [p for p in run.src_pieces if p not in ("[end]", "[pad]")]
    return ["[begin]", *src, sep, *run.tgt_pieces[1:]], len(src) + 2


def masked_scores(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scores with forbidden positions set to -inf (what softmax sees)."""
    return scores.masked_fill(~mask, float("-inf"))
