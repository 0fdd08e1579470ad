"""Fill in the blank: a masked-LM's top predictions at each [MASK] of a run, at its output and after every
layer (a lens through the head's own dense layer, activation and norm, then the unembedding).

    blanks = fill_blanks(hm, hm.run("The cat sat on the [MASK]."))
    blanks[0].top[0]       # ("▁mat", 0.41): the output's best piece and its probability
    blanks[0].layers[0]    # the same read from the embeddings (row 0), then after each layer

Row 0 reads `encoder.0.hook_resid_pre` (the embeddings, after their norm), row i + 1 `encoder.{i}.hook_resid_post`;
the last row is the model's own output. Early rows are a rough reading: the head was trained on the last one.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from viz_transformer.core.hook_names import layer_name


@dataclass
class Blank:
    position: int                          # the [MASK]'s index in run.src_ids
    top: list[tuple[str, float]]           # the output's k best pieces and their probabilities
    top_ids: list[int]
    layers: list[list[tuple[str, float]]]  # per residual stream (embeddings first, output last), its k best


def mask_positions(hm, run) -> list[int]:
    """Where the text holds the tokenizer's mask token ([MASK], <mask>); [] when it has none."""
    mask_id = getattr(hm.tokenizer, "mask_id", None)
    return [i for i, x in enumerate(run.src_ids or ()) if mask_id is not None and x == mask_id]


@torch.no_grad()
def fill_blanks(hm, run, k: int = 5) -> list[Blank]:
    """The k best pieces at every [MASK] of an encoder-only run, at the output and after every layer. ValueError,
    in one line, for a model without a masked-LM head (a sentence encoder, a decoder)."""
    cfg = hm.cfg
    if not cfg.is_encoder_only or cfg.head != "mlm":
        raise ValueError("fill in the blank needs a masked-LM head (an encoder-only model such as BertForMaskedLM); "
                         "this model has none")
    if not 1 <= k <= 50:
        raise ValueError(f"k must be a whole number from 1 to 50, not {k!r}")
    positions = mask_positions(hm, run)
    if not positions:
        return []
    names = [layer_name("encoder", 0, "hook_resid_pre")] + \
        [layer_name("encoder", i, "hook_resid_post") for i in range(cfg.n_encoder_layers)]
    resid = torch.stack([run.cache[n][0, positions] for n in names])           # (rows, M, d)
    probs = torch.softmax(hm.model.unembed(resid.float()).float(), -1)          # (rows, M, vocab)
    out_probs = torch.softmax(run.logits[positions].float(), -1)               # (M, vocab)
    blanks = []
    for j, pos in enumerate(positions):
        p, ids = out_probs[j].topk(k)
        lp, lids = probs[:, j].topk(k, dim=-1)                                  # (rows, k)
        blanks.append(Blank(pos, list(zip(hm.tokenizer.pieces(ids.tolist()), p.tolist())), ids.tolist(),
                            [list(zip(hm.tokenizer.pieces(r_ids), r_p)) for r_ids, r_p in
                             zip(lids.tolist(), lp.tolist())]))
    return blanks
