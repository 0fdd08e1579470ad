"""Model inputs as tensors, and the one way to run them: one forward, one KV-cache constructor.

Every architecture is fed the same way: a `Batch` holds the encoder input (an encoder-decoder only), the
decoder input and the prefix length (a prefix LM only), so no caller asks which architecture it has.

    b = make_batch(hm.cfg, [encode_input(tok, cfg, text)], [output_ids])
    logits, cache = forward(hm.model, b, capture=True)         # cache: every hook, as run_with_cache
    kv = start_cache(hm.model, b)                               # incremental decoding from b's prompts
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Sequence, Union

import torch

from viz_transformer.core.hooks import Cache, NamesFilter, hooks_active
from viz_transformer.core.encoding import ModelInput

PrefixLen = Union[None, int, torch.Tensor]


def model_device(model) -> torch.device:
    """Where a model's weights are (the CPU in the app; a GPU while training on one): its inputs go there."""
    return next(model.parameters()).device


def pad_rows(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad id lists into one [B, T] tensor: the one padding helper."""
    T = max(len(r) for r in rows)
    out = torch.full((len(rows), T), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
    return out


@dataclass(frozen=True)
class Batch:
    """Right-padded model input: src [B, S] (None for a one-sequence model), dec [B, T], and prefix_len
    (None; an int for every row; or [B], one per row)."""
    src: Optional[torch.Tensor]
    dec: torch.Tensor
    prefix_len: PrefixLen = None
    src_len: Optional[tuple[int, ...]] = None     # each row's length before padding (None: no padding)
    dec_len: Optional[tuple[int, ...]] = None
    types: Optional[torch.Tensor] = None          # [B, S] segment ids of an encoder-only model's src

    def __len__(self) -> int:
        return self.dec.shape[0]

    def to(self, device) -> "Batch":
        """The same batch with its tensors on `device` (a model's, model_device(model)): a no-op where they are."""
        move = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t
        return replace(self, src=move(self.src), dec=move(self.dec), prefix_len=move(self.prefix_len),
                       types=move(self.types))

    def expand(self, n: int) -> "Batch":
        """A batch of one repeated as n rows (no copy)."""
        if len(self) != 1:
            raise ValueError(f"only a batch of one row can be expanded, not {len(self)} rows")
        src = None if self.src is None else self.src.expand(n, -1)
        prefix = self.prefix_len.expand(n) if isinstance(self.prefix_len, torch.Tensor) else self.prefix_len
        return replace(self, src=src, dec=self.dec.expand(n, -1), prefix_len=prefix,
                       types=None if self.types is None else self.types.expand(n, -1),
                       src_len=None if self.src_len is None else self.src_len * n,
                       dec_len=None if self.dec_len is None else self.dec_len * n)


def make_batch(cfg, inputs: Sequence[ModelInput], outputs: Optional[Sequence[Sequence[int]]] = None) -> Batch:
    """The batch for inputs (and, per row, output ids teacher-forced after its prompt; cut at max_len)."""
    if not inputs:
        raise ValueError("a batch needs at least one input")
    outputs = outputs if outputs is not None else [()] * len(inputs)
    if len(outputs) != len(inputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    dec = [inp.decoder_ids(out)[: cfg.max_len] for inp, out in zip(inputs, outputs)]
    pad = cfg.pad_id if cfg.pad_id >= 0 else 0     # a model with no [pad] (GPT-2, Llama): rows padded on the right
    src = src_len = None                           # with any id, which causal attention never lets a real row see
    if inputs[0].src is not None:
        src, src_len = pad_rows([list(inp.src) for inp in inputs], pad), tuple(len(inp.src) for inp in inputs)
    prefix: PrefixLen = None
    if inputs[0].prefix_len is not None:
        lens = [inp.prefix_len for inp in inputs]
        prefix = lens[0] if len(set(lens)) == 1 else torch.tensor(lens)
    types = None
    if inputs[0].segments is not None:
        types = pad_rows([list(inp.segments) for inp in inputs], 0)
    return Batch(src, pad_rows(dec, pad), prefix, src_len, tuple(len(r) for r in dec), types)


def one_row(src_ids: Optional[Sequence[int]], dec_ids: Sequence[int], prefix_len: Optional[int] = None,
            segments: Optional[Sequence[int]] = None) -> Batch:
    """A batch of one from ids already made (a Run's or a Trace's)."""
    src = None if src_ids is None else torch.tensor([list(src_ids)], dtype=torch.long)
    types = None if segments is None else torch.tensor([list(segments)], dtype=torch.long)
    return Batch(src, torch.tensor([list(dec_ids)], dtype=torch.long).reshape(1, -1), prefix_len, types=types)


def forward(model, batch: Batch, fwd_hooks=(), capture: bool = False, names_filter: NamesFilter = None,
            logits_at: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, Optional[Cache]]:
    """(logits [B, T, vocab], Cache or None): the model on a batch, with fwd_hooks active for this call;
    capture=True also keeps the hooks that names_filter selects (default every one), as run_with_cache.
    logits_at (bool [B, T]): logits only at those positions, [N, vocab] (every hook point comes before this choice;
    all False: no row is projected onto the vocabulary, for a capture alone)."""
    if model.cfg.is_encoder_decoder and batch.src is None:
        raise ValueError("an encoder-decoder model needs the source ids as well as the decoder input")
    batch = batch.to(model_device(model))
    with torch.no_grad(), hooks_active(model.resolve_hooks(fwd_hooks)):
        if model.cfg.is_encoder_only:             # one sequence, read both ways: the src and its segments
            args, kw = (batch.src,), {"types": batch.types}
        else:
            args = (batch.src, batch.dec) if batch.src is not None else (batch.dec,)
            kw = {"prefix_len": batch.prefix_len}
        if capture:
            return model.run_with_cache(*args, names_filter=names_filter, logits_at=logits_at, **kw)
        return model(*args, logits_at=logits_at, **kw), None


def start_cache(model, batch: Batch):
    """The KV cache for decoding on from the batch's prompts: the encoder run once on its source (an
    encoder-only model refuses: it does not generate)."""
    prefix = batch.prefix_len
    if isinstance(prefix, torch.Tensor):
        if len(set(prefix.tolist())) != 1:
            raise ValueError("incremental decoding needs one prefix length for every row")
        prefix = int(prefix[0])
    return model.new_cache(batch.src, prefix_len=prefix)
