"""The order test: a text's pieces permuted, through a (possibly intervened) model. Without positional
encoding an encoder's outputs permute with its input: it reads a bag of pieces.

    order_test(hm, "我喜欢你。", "reverse", fwd_hooks=positions_off_hooks(hm)).gap   # ~0: a bag of pieces
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from viz_transformer.core.batch import forward, make_batch
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input, default_new_tokens
from viz_transformer.run.greedy_check import greedy_checked
from viz_transformer.run.logit_rules import never_generated
from viz_transformer.core.encoding import ModelInput, as_input
from viz_transformer.core.tokenizer import source_pieces

PERMUTATIONS = ("reverse", "swap")


def permutation(ids, specials, how: str = "reverse", keep=()) -> list[int]:
    """Positions of `ids` in a new order: the pieces that are not special ([begin], [end]) and not at a
    position in `keep` reversed, or the first and last of them swapped; the others stay. ValueError
    below two pieces."""
    if how not in PERMUTATIONS:
        raise ValueError(f"unknown permutation {how!r}; choose one of {', '.join(PERMUTATIONS)}")
    movable = [i for i, x in enumerate(ids) if x not in set(specials) and i not in set(keep)]
    if len(movable) < 2:
        raise ValueError(f"the text has {len(movable)} piece(s): at least 2 are needed to change their order")
    moved = movable[::-1] if how == "reverse" else [movable[-1]] + movable[1:-1] + [movable[0]]
    order = list(range(len(ids)))
    for i, j in zip(movable, moved):
        order[i] = j
    return order


def word_free(pieces) -> list[int]:
    """Positions of the pieces that hold no letter or digit (punctuation, a lone ▁): they stay in place
    when a text's pieces are permuted, so a sentence never trades places with its full stop."""
    return [i for i, p in enumerate(pieces) if not any(c.isalnum() for c in p.replace("\u2581", ""))]


def multiset_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """How far two sets of row vectors [n, d] are from being the same: the largest distance (max
    |difference| over dims) from any row of either to its nearest row of the other. 0 when b's rows
    are a's rows in another order."""
    if a.shape != b.shape:
        raise ValueError(f"the two sets have shapes {tuple(a.shape)} and {tuple(b.shape)}")
    d = torch.cdist(a.float()[None], b.float()[None], p=float("inf"))[0]   # (n, n); never the (n, n, d) differences
    return float(torch.maximum(d.amin(1).max(), d.amin(0).max()))


@dataclass
class OrderTest:
    """A text's pieces and the same pieces in another order, through one (possibly intervened) model."""
    part: str                      # "encoder" (translator) or "decoder" (LM): whose outputs are compared
    pieces: list[str]              # the model's input pieces (encoder input, or [begin] + prompt)
    permuted_pieces: list[str]
    order: list[int]               # permuted_pieces[i] = pieces[order[i]]
    outputs: torch.Tensor          # [pos, d_model] last layer's hook_resid_post
    permuted_outputs: torch.Tensor
    gap: float                     # multiset_gap(outputs, permuted_outputs)
    output: str                    # greedy output (translation / continuation) for each input
    permuted_output: str


def encoder_outputs_name(cfg) -> Optional[str]:
    """The capture order_test compares for a translator (its encoder's last hook_resid_post), which a run of the
    same text under the same hooks already holds: same ids, same forward (run_outputs); None for a one-sequence
    model, whose run reads the prompt together with its continuation."""
    return f"encoder.{cfg.n_encoder_layers - 1}.hook_resid_post" if cfg.is_encoder_decoder else None


def run_outputs(run, cfg) -> Optional[torch.Tensor]:
    """order_test's `outputs` read off a translator's run (hm.run with encoder_outputs_name captured) [pos, d];
    None when the run has none."""
    name = encoder_outputs_name(cfg)
    return run.cache[name][0] if name is not None and name in run.cache else None


def _last_layer(hm, inp: ModelInput, fwd_hooks) -> torch.Tensor:
    """The last layer's hook_resid_post over the input: the encoder's (translator) or the decoder's."""
    cfg = hm.cfg
    part = "encoder" if inp.src is not None else "decoder"
    name = f"{part}.{hm.model.n_layers[part] - 1}.hook_resid_post"
    _, cache = forward(hm.model, make_batch(cfg, [inp]), fwd_hooks, capture=True, names_filter=[name])
    return cache[name][0]                                                         # (pos, d)


def _greedy(hm, inp: ModelInput, fwd_hooks, max_new_tokens: int,
            guess: Optional[Sequence[int]] = None) -> tuple[str, Optional[torch.Tensor]]:
    """The greedy output of inp under fwd_hooks and, for a translator, its last encoder layer's outputs [pos, d],
    kept as decoding encodes the source (once: the same encode _last_layer makes, not made a second time). guess:
    output ids checked first in one forward (greedy_check), which then gives those outputs."""
    name, seen = encoder_outputs_name(hm.cfg), {}

    def keep(x, hook) -> None:                   # None: the tensor goes on unchanged
        seen.setdefault("x", x[0].detach().clone())
    hooks = [*fwd_hooks, *([(name, keep)] if name else [])]
    ids = None if guess is None else greedy_checked(hm.model, inp, guess, max_new_tokens,
                                                    never_generated(hm.tokenizer), hooks)
    if ids is None:
        seen.clear()
        ids = decode_input(hm.model, hm.tokenizer, inp, DecodeSettings(max_new_tokens=max_new_tokens),
                           hooks=hooks).generated_ids
    return hm.tokenizer.decode(ids), seen.get("x")


def order_test(hm, text, how: str = "reverse", fwd_hooks=(), max_new_tokens=None,
               output: Optional[str] = None, outputs: Optional[torch.Tensor] = None,
               same_output: Optional[Sequence[int]] = None) -> OrderTest:
    """Run the text's own piece ids and a permutation of its word pieces (`permutation`; `word_free`
    pieces stay) through the model with fwd_hooks: the last layer's outputs over the input, how far
    they are from one multiset, and the greedy output of each. Without positions an encoder's outputs permute
    with its input (gap ~0). text: a string, or the ModelInput a run already made (`run.input`).
    output: the greedy output of the text's own ids under the same hooks, when the caller already has it
    (the app's cached run): it is not decoded again. outputs: likewise the last layer's outputs over the text's
    own ids [pos, d] (run_outputs of that run): that forward is not made again. A translator's outputs over an input
    it decodes are kept from that decoding's encoder pass (_greedy). same_output: output ids the permuted input is
    expected to give too (a model without positions: the text's own); checked in one forward (greedy_check), and
    decoded only where the check fails."""
    tok, cfg = hm.tokenizer, hm.cfg
    max_new_tokens = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
    inp = as_input(tok, cfg, text, max_new_tokens)
    ids = inp.ids
    order = permutation(ids, {cfg.bos_id, cfg.eos_id}, how, keep=word_free(source_pieces(tok, ids)))
    moved = inp.with_ids([ids[i] for i in order])
    texts, outs = [output, None], [outputs, None]
    for i, x in enumerate((inp, moved)):
        if texts[i] is None:
            texts[i], kept = _greedy(hm, x, fwd_hooks, max_new_tokens, same_output if i else None)
            outs[i] = kept if outs[i] is None else outs[i]
        if outs[i] is None:
            outs[i] = _last_layer(hm, x, fwd_hooks)
    return OrderTest("encoder" if inp.src is not None else "decoder", source_pieces(tok, ids),
                     source_pieces(tok, moved.ids), order,
                     outs[0], outs[1], multiset_gap(outs[0], outs[1]), texts[0], texts[1])
