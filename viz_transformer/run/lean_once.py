"""A lean run of a one-sequence model (decoder-only or prefix LM) that reads its prompt once.

The plain lean run (capture.HookedModel.run with lean=True) reads the prompt twice: generation's first step
runs the whole prompt to fill its KV cache, then the capture runs prompt + output again. Here the prompt's
capture is that first step: its forward fills the KV cache and gives the last position's logits; generation
goes on from there; the output's positions are then captured in one forward with the prompt's cache as
past, and the two captures are joined along the position axis (the mask into the [T+n, T+n] mask the model
uses on the whole sequence). The same names, shapes and dtypes as the plain lean run; the generated ids and
the trace the same bit for bit (the prompt's forward computes what generation's own first step does), the
captured values and logits the same to float rounding (computed in two passes, against cached keys, instead
of one over the whole sequence; tests/test_lean_fast.py). The logits are a RowLogits (run/row_logits.py): the
output's rows kept, every other row projected from the last residual when read, never all at once.

    if reads_prompt_once(hm.model, target, hooks):
        trace, out_ids, logits, cache = lean_run_once(hm.model, hm.tokenizer, inp, 64, shown_captures)
"""
from __future__ import annotations

import dataclasses
import torch

from viz_transformer.core.batch import make_batch, start_cache
from viz_transformer.core.encoding import ModelInput
from viz_transformer.core.hooks import NamesFilter, hooks_active
from viz_transformer.core.model import KVCache
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input
from viz_transformer.run.generation import last_rows, pattern_names
from viz_transformer.run.derived_cache import DerivedCache, lean_capture
from viz_transformer.run.logit_rules import never_generated
from viz_transformer.run.row_logits import RowLogits, row_logits
from viz_transformer.run.trace import Trace

POSITION_AXIS = {"hook_pos": 0}     # [pos, d_model]; every other capture of a one-sequence model is [batch, pos, ...]


def reads_prompt_once(model, target, fwd_hooks) -> bool:
    """Whether HookedModel.run(lean=True) may take lean_run_once: a generated output (no given target), no
    fwd_hooks (an intervention changes tensors the check must compare), a one-sequence model without T5's
    relative bias (a stack-wide [head, q, k] capture), float32 weights (bfloat16 rounds the cached and the
    one-pass forwards apart by more than float32 does)."""
    cfg = model.cfg
    return (target is None and not fwd_hooks and not cfg.is_encoder_decoder and not cfg.is_encoder_only
            and cfg.positional != "relative" and cfg.n_decoder_layers > 0
            and model.lm_head.weight.dtype == torch.float32)


def _decode(model, ids: torch.Tensor, kv: KVCache, last: str) -> torch.Tensor:
    """The decoder on ids after kv's positions, no vocabulary projection: the last block's output [1, T, d]."""
    out: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        out["x"] = x
    with hooks_active([(last, keep)]):
        model.decode(ids, cache=kv, logits_at=torch.zeros(ids.shape, dtype=torch.bool))
    return out["x"]


def _join(name: str, first: torch.Tensor, then: torch.Tensor) -> torch.Tensor:
    """A capture of the prompt and of the output's positions as one capture of the whole sequence."""
    hook = name.rsplit(".", 1)[1]
    if hook == "hook_mask":                   # [1, 1, T, T] and [1, 1, n, T + n]: no prompt query sees the output
        pad = first.new_zeros(*first.shape[:-1], then.shape[-1] - first.shape[-1])
        return torch.cat([torch.cat([first, pad], -1), then], -2)
    return torch.cat([first, then], POSITION_AXIS.get(hook, 1))


def _joined(first: DerivedCache, then: DerivedCache) -> DerivedCache:
    stored = first._t
    done: dict[tuple[int, int], torch.Tensor] = {}      # captures one tensor held under two names stay one tensor
    for name in list(stored):
        pair = (id(stored[name]), id(then._t[name]))
        if pair not in done:
            done[pair] = _join(name, stored[name], then._t[name])
        then._t.pop(name)
        stored[name] = done[pair]                       # one name at a time: less held at once
    return DerivedCache(stored, first.derived, first.order, first.n_layers)


@torch.no_grad()
def lean_run_once(model, tok, inp: ModelInput, max_new_tokens: int,
                  names_filter: NamesFilter = None) -> tuple[Trace, list[int], RowLogits, DerivedCache]:
    """(greedy trace, output ids, logits [T + n, vocab] as a RowLogits, cache) of a lean run that reads the prompt
    once (module doc). Only where reads_prompt_once holds."""
    cfg = model.cfg
    last = f"decoder.{cfg.n_decoder_layers - 1}.hook_resid_post"
    batch = make_batch(cfg, [inp])
    kv = start_cache(model, batch)
    row_hooks, rows = last_rows(pattern_names(cfg))

    def prompt():
        with hooks_active(row_hooks):
            return _decode(model, batch.dec, kv, last)
    x, cache = lean_capture(model, prompt, names_filter, check=False)
    prompt_kv = dataclasses.replace(kv, layers=[dict(layer) for layer in kv.layers])   # generation replaces kv's
    first = model.unembed(x[:, -1])                 # [1, V], as generation's own first step projects it
    trace = decode_input(model, tok, inp, DecodeSettings(max_new_tokens=max_new_tokens), past=(kv, first, rows))
    out_ids = trace.generated_ids[: max(0, cfg.max_len - len(inp.prompt))]
    if out_ids:
        x_out, then = lean_capture(model, lambda: _decode(model, torch.tensor([out_ids]), prompt_kv, last),
                                   names_filter, check=False)
        x, cache = torch.cat([x, x_out], 1), _joined(cache, then)
    kept = cache._t.get(last)
    if kept is not None and torch.equal(kept, x):
        x = kept                                        # the last residual is a capture too: held once
    ids = inp.decoder_ids(list(out_ids))
    logits = row_logits(model.unembed, x[0], ids[1:], len(inp.prompt) - 1, never_generated(tok))
    return trace, list(out_ids), logits, cache

