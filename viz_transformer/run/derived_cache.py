"""Runs kept small for a long-lived cache (the app's): the attention scores and patterns, the largest
captures ([batch, head, q, k] each), are not stored but recomputed when read, from the captured q, k, v
and mask with the model's own attention function, and only where that gives back exactly the captured
tensor (checked bit for bit when the run is compacted; a capture an intervention changed stays stored).

    small = compact_run(hm.run(text))        # small.cache[name] == run.cache[name] for every name
    lean = compact_run(hm.run(text, names_filter=patterns_only, fwd_hooks=hooks))   # output, logits, patterns
    long = hm.run(text, lean=True)           # the same cache as `small`, never holding every block's patterns
                                             # (an LM's output positions: to float rounding, run/lean_once.py)

A long text needs the last form: at 2,048 pieces a Qwen2.5-0.5B-sized model's scores and patterns are
24 x 14 x 2048^2 x 4 B = 5.6 GB each, so lean_forward checks each block's as they pass and keeps none.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

import torch

from viz_transformer.core.attention import attention, repeat_kv
from viz_transformer.core.batch import forward, model_device
from viz_transformer.core.hooks import Cache, NamesFilter, hooks_active, resolve_names
from viz_transformer.core.positional import bias_capture, position_terms
from viz_transformer.run.row_logits import RowLogits, row_logits

DERIVED = {"hook_scores": "scaled", "hook_pattern": "weights"}     # capture -> AttentionSteps field
INPUTS = ("hook_q", "hook_k", "hook_v", "hook_mask")
PATTERN_CAPTURES = ("hook_pattern", "hook_rot_q", "hook_rot_k", "hook_bias") + INPUTS   # a pattern and what recomputes it


def patterns_only(name: str) -> bool:
    """names_filter for a run read only for its output, logits and attention patterns (an intervened run
    shown beside the original): compact_run then stores q, k, v and mask alone, about a third of a full
    capture (the feed-forward and residual captures are most of it)."""
    return name.rsplit(".", 1)[-1] in PATTERN_CAPTURES


UNSHOWN = ("hook_post", "hook_resid_mid", "hook_z", "hook_out")   # the feed-forward activations, the
    # residual between the sublayers, each head's and block's output: no page reads them from a text's run (knock-out
    # and patching run the model for what they need), a third of a run (1.5 GB at 2,048 pieces, Qwen2.5-0.5B-sized)


def shown_captures(name: str) -> bool:
    """names_filter for the run the explorer's pages share: every capture but UNSHOWN."""
    return name.rsplit(".", 1)[-1] not in UNSHOWN


def recompute(tensors: dict[str, torch.Tensor], prefix: str):
    """The AttentionSteps of the attention block `prefix` (e.g. "encoder.0.self_attn") from its captured
    q, k, v [batch, pos, head, d_head] (q and k after the rotation, with RoPE; key/value heads shared by
    groups of query heads, with grouped-query attention) and mask [batch, 1, q, k], as the model computed them."""
    rotated = f"{prefix}.hook_rot_q" in tensors
    q = tensors[f"{prefix}.hook_rot_q" if rotated else f"{prefix}.hook_q"].transpose(1, 2)      # (B, nh, T, hs)
    k = tensors[f"{prefix}.hook_rot_k" if rotated else f"{prefix}.hook_k"].transpose(1, 2)      # (B, nkv, T, hs)
    v = tensors[f"{prefix}.hook_v"].transpose(1, 2)
    n_rep = q.shape[1] // k.shape[1]
    divisor, bias = position_terms(tensors, prefix)
    return attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), tensors[f"{prefix}.hook_mask"], divisor, bias=bias)


class DerivedCache(Cache):
    """A Cache whose `derived` names (name -> block prefix) are recomputed on every read; the rest are stored."""

    def __init__(self, stored: dict[str, torch.Tensor], derived: dict[str, str], order: list[str],
                 n_layers: Optional[dict[str, int]] = None):
        super().__init__(stored, n_layers)
        self.derived, self.order = dict(derived), list(order)

    def __getitem__(self, name: str) -> torch.Tensor:
        prefix = self.derived.get(name)
        if prefix is None:
            return super().__getitem__(name)
        return getattr(recompute(self._t, prefix), DERIVED[name.rsplit(".", 1)[1]])

    def __contains__(self, name: object) -> bool:
        return name in self._t or name in self.derived

    def __iter__(self) -> Iterator[str]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)

    def keys(self):
        return list(self.order)

    def items(self):
        return [(n, self[n]) for n in self.order]

    def __repr__(self) -> str:
        return f"DerivedCache({len(self._t)} stored, {len(self.derived)} recomputed on read)"


def compact_cache(cache: Cache) -> Cache:
    """The same captures with every score and pattern that recomputes exactly left out of storage."""
    if isinstance(cache, DerivedCache):
        return cache
    stored = dict(cache.items())
    derived: dict[str, str] = {}
    prefixes = {n.rsplit(".", 1)[0] for n in stored if n.endswith(".hook_pattern") or n.endswith(".hook_scores")}
    for prefix in sorted(prefixes):
        if not all(f"{prefix}.{h}" in stored for h in INPUTS):
            continue
        steps = recompute(stored, prefix)
        for hook, field in DERIVED.items():
            name = f"{prefix}.{hook}"
            if name in stored and torch.equal(getattr(steps, field), stored[name]):
                derived[name] = prefix
    if not derived:
        return cache
    kept = {n: t for n, t in stored.items() if n not in derived}
    return DerivedCache(kept, derived, list(stored), cache.n_layers)


def compact_run(run):
    """A Run (or any dataclass with a `cache`) whose cache is compacted; everything else shared."""
    return dataclasses.replace(run, cache=compact_cache(run.cache))


def lean_forward(model, batch, fwd_hooks=(), names_filter: NamesFilter = None):
    """forward(model, batch, fwd_hooks, capture=True, names_filter) as (logits, cache), with every score and
    pattern checked against its block's recompute as it passes (after any fwd_hook changed it) and stored only
    where they differ: at most one block's [batch, head, q, k] tensors exist at a time. A block whose scores or
    pattern are asked for keeps its q, k, v and mask, asked for or not (what they are recomputed from)."""
    return lean_capture(model, lambda: forward(model, batch)[0], names_filter, fwd_hooks)


def lean_rows(model, batch, fwd_hooks=(), names_filter: NamesFilter = None, keep_from: int = 0,
              banned: tuple = ()) -> tuple[RowLogits, "DerivedCache"]:
    """lean_forward for one row of a one-sequence model (decoder-only, prefix LM), its logits [T, vocab] a RowLogits
    (run/row_logits.py: the rows from keep_from on kept, the others projected from the last residual when read;
    banned: the ids its greedy picks leave out), never the whole [T, vocab] tensor."""
    last = f"decoder.{model.cfg.n_decoder_layers - 1}.hook_resid_post"
    batch = batch.to(model_device(model))
    out: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        out["x"] = x

    def call():
        with hooks_active([(last, keep)]):          # after fwd_hooks and the capture: the residual unembed reads
            model.decode(batch.dec, prefix_len=batch.prefix_len,
                         logits_at=torch.zeros(batch.dec.shape, dtype=torch.bool))
        return out.pop("x")[0]
    x, cache = lean_capture(model, call, names_filter, fwd_hooks)
    kept = cache._t.get(last)
    if kept is not None and torch.equal(kept[0], x):
        x = kept[0]                                 # the last residual is a capture too: held once
    return row_logits(model.unembed, x, batch.dec[0, 1:].tolist(), keep_from, list(banned)), cache


def lean_capture(model, call, names_filter: NamesFilter = None, fwd_hooks=(), check: bool = True):
    """(call(), DerivedCache): lean_forward's capture around any call of the model (call runs it; the capture's
    hooks and fwd_hooks are active meanwhile). check=False marks every asked-for score and pattern as
    recomputed on read without comparing it: only for a call no fwd_hook changes, where the model's
    tensor is by construction what the recompute gives from the stored q, k, v and mask."""
    names = resolve_names(names_filter, model.hook_names)
    wanted = set(names)
    blocks = {n.rsplit(".", 1)[0] for n in names if n.rsplit(".", 1)[1] in DERIVED}
    inputs = [n for n in model.hook_names if n.rsplit(".", 1)[0] in blocks
              and n.rsplit(".", 1)[1] in ("hook_rot_q", "hook_rot_k") + INPUTS]
    inputs += [n for n in model.hook_names if n in {bias_capture(b) for b in blocks}]      # T5: the stack's bias
    cache = Cache(n_layers=model.n_layers)
    derived: dict[str, str] = {}
    held: dict[str, torch.Tensor] = {}            # a block's scores, until its pattern passes (the mask comes between)
    order: dict[str, None] = {}                   # names in the order they passed, as a full capture keeps them
    sources: dict[tuple, str] = {}                # (storage, offset, shape, strides, dtype) of a tensor -> its name

    def save(x, hook):
        order[hook.name] = None
        src = (x.untyped_storage().data_ptr(), x.storage_offset(), tuple(x.shape), x.stride(), x.dtype)
        twin = cache._t.get(sources.get(src, ""))
        if twin is not None and twin.dtype == x.dtype and torch.equal(twin, x) and not (
                hook.passes_on and twin.untyped_storage().data_ptr() == src[0]):
            cache._t[hook.name] = twin          # the tensor another name captured, unchanged (a block's resid_post is
            return                              # the next block's resid_pre; every layer's mask): kept once
        sources[src] = hook.name
        cache.store(hook.name, x, fresh=not hook.passes_on)

    def hold(x, hook):
        order[hook.name] = None
        held[hook.name] = x

    def check_block(x, hook):
        order[hook.name] = None
        prefix = hook.name.rsplit(".", 1)[0]
        steps = recompute(cache._t, prefix)
        for name, t in ((f"{prefix}.hook_scores", held.pop(f"{prefix}.hook_scores", None)), (hook.name, x)):
            if t is None or name not in wanted:
                continue
            if torch.equal(getattr(steps, DERIVED[name.rsplit(".", 1)[1]]), t):
                derived[name] = prefix
            else:
                cache.store(name, t)

    def mark(x, hook):
        order[hook.name] = None
        if hook.name in wanted:
            derived[hook.name] = hook.name.rsplit(".", 1)[0]

    hooks = [(n, save) for n in dict.fromkeys(inputs + [n for n in names if n.rsplit(".", 1)[1] not in DERIVED])]
    if check:
        hooks += [(f"{b}.hook_scores", hold) for b in blocks] + [(f"{b}.hook_pattern", check_block) for b in blocks]
    else:
        hooks += [(f"{b}.{h}", mark) for b in blocks for h in DERIVED]
    with torch.no_grad(), hooks_active(model.resolve_hooks(list(fwd_hooks) + hooks)):
        out = call()
    kept = [n for n in order if n in cache or n in derived]
    return out, DerivedCache(dict(cache.items()), derived, kept, model.n_layers)
