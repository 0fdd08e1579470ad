"""A long run's logits without the [pos, vocab] tensor: rows computed from the last residual when read.

A lean run of a 2,112-piece text on a 151,936-id vocabulary would keep 1.2 GB of logits, of which the pages
read a few rows (the output's, a window of the logit lens) and two per-row summaries (each row's greedy pick,
the log-probability of the next piece for the prompt's perplexity). RowLogits keeps the last block's output
[pos, d_model] instead, and computes the vocabulary projection a block of ROWS rows at a time: once during the
run for the summaries and the rows it keeps, and again for any other row read later, on the same blocks, so a
row read later is bit for bit the row the summaries were computed from.

    logits = row_logits(model.unembed, x, next_ids, keep_from=prompt_len - 1, banned=never_generated(tok))
    logits[prompt_len - 1:]      # kept rows: no projection
    logits[5]                    # block 0 projected again: [vocab]
    logits.predicted_ids         # per row: argmax without the banned ids (as greedy picks)
    logits.next_logprobs         # per row i < pos - 1: log_softmax(logits[i])[next_ids[i]]
    torch.allclose(logits, ref)  # any torch function gets the whole tensor (materialised: 1.2 GB at 2,112 pieces)
"""
from __future__ import annotations

from typing import Callable, Optional

import torch


ROWS = 256          # rows projected at a time: [256, 151,936] float32 is 148 MiB (128 rows: 1.4x the CPU time of one
                    # projection of all 2,112 rows, 256: 1.2x, 512: 1.1x; two threads, Qwen2.5-0.5B-sized)


def picked(block: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log_softmax(block[i])[ids[i]] for the first len(ids) rows of block [n, vocab]: [len(ids)]."""
    n = len(ids)
    return torch.log_softmax(block[:n].float(), -1)[torch.arange(n), ids]


class RowLogits:
    """logits [pos, vocab] kept as the residual they are projected from (module doc). Indexing by rows (an int,
    a slice, a list or tensor of positions, optionally followed by vocabulary indices) returns a tensor; torch
    functions and other tensor methods see the whole tensor, made for the call."""

    def __init__(self, unembed: Callable[[torch.Tensor], torch.Tensor], resid: torch.Tensor, vocab: int, step: int,
                 kept_from: int, kept: torch.Tensor, predicted_ids: list[int], next_logprobs: torch.Tensor):
        self._unembed, self.resid, self.vocab, self.step = unembed, resid, vocab, step    # step: rows per block
        self.kept_from, self.kept = kept_from, kept             # rows kept_from ... pos - 1, as projected in the run
        self.predicted_ids, self.next_logprobs = predicted_ids, next_logprobs

    # -- the tensor's description --------------------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.resid.shape[0], self.vocab))

    @property
    def dtype(self) -> torch.dtype:
        return self.kept.dtype                  # float32 on the CPU for a loaded model (Transformer.unembed)

    @property
    def device(self) -> torch.device:
        return self.kept.device

    ndim = 2

    def dim(self) -> int:
        return 2

    def size(self, d=None):
        return self.shape if d is None else self.shape[d]

    def __len__(self) -> int:
        return self.resid.shape[0]

    def float(self) -> "RowLogits":
        return self

    def __repr__(self) -> str:
        return f"RowLogits({tuple(self.shape)}, rows {self.kept_from}… kept, the rest projected when read)"

    # -- rows --------------------------------------------------------------------------------------------
    def block(self, b: int) -> torch.Tensor:
        """Rows b·step … of the logits, projected as the run projected them: [≤ step, vocab]."""
        return self._unembed(self.resid[b * self.step:(b + 1) * self.step])

    def rows(self, positions: list[int]) -> torch.Tensor:
        """The logits at positions (each in 0 … pos - 1): [len(positions), vocab]."""
        out = torch.empty(len(positions), self.vocab, dtype=self.dtype, device=self.device)
        need: dict[int, list[int]] = {}
        for i, p in enumerate(positions):
            if p >= self.kept_from:
                out[i] = self.kept[p - self.kept_from]
            else:
                need.setdefault(p // self.step, []).append(i)
        for b, at in need.items():
            block = self.block(b)
            out[at] = block[[positions[i] - b * self.step for i in at]]
        return out

    def __getitem__(self, idx):
        first, rest = (idx[0], idx[1:]) if isinstance(idx, tuple) else (idx, ())
        T = len(self)
        if first is Ellipsis:
            return self.full()[idx]
        if isinstance(first, slice):
            got = self.rows(list(range(*first.indices(T))))
        else:
            single = isinstance(first, int) or (isinstance(first, torch.Tensor) and first.dim() == 0)
            pos = torch.as_tensor(first)
            if pos.dtype == torch.bool:
                pos = pos.nonzero().flatten()
            pos = pos.flatten().tolist()
            bad = [p for p in pos if not -T <= p < T]
            if bad:
                raise IndexError(f"row {bad[0]} is out of range for logits of {T} rows")
            got = self.rows([p % T for p in pos])
            if single:
                return got[0][rest] if rest else got[0]
        return got[(slice(None),) + rest] if rest else got

    def full(self) -> torch.Tensor:
        """The whole [pos, vocab] tensor (1.2 GB at 2,112 pieces of a 151,936-id vocabulary)."""
        return self.rows(list(range(len(self))))

    # -- everything else: the whole tensor -----------------------------------------------------------------
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def whole(x):
            if isinstance(x, RowLogits):
                return x.full()
            if isinstance(x, (list, tuple)):
                return type(x)(whole(y) for y in x)
            return x
        return func(*whole(args), **{k: whole(v) for k, v in (kwargs or {}).items()})

    def __getattr__(self, name: str):
        if name.startswith("_") or not hasattr(torch.Tensor, name):     # hasattr(logits, "x") projects nothing
            raise AttributeError(name)
        return getattr(self.full(), name)


def row_logits(unembed: Callable[[torch.Tensor], torch.Tensor], resid: torch.Tensor, next_ids: list[int],
               keep_from: int, banned: list[int], step: Optional[int] = None) -> RowLogits:
    """The logits of resid [pos, d_model] (unembed: the model's final norm and vocabulary projection) as a
    RowLogits: each block of `step` rows (default ROWS) projected once, for its greedy picks (argmax without
    `banned`), the log-probabilities of next_ids (next_ids[i]: the id after row i, for rows 0 … len(next_ids) - 1)
    and the rows from keep_from on, which are kept."""
    T, step = resid.shape[0], step or ROWS
    keep_from = max(0, min(keep_from, T))
    ids = torch.as_tensor(list(next_ids), dtype=torch.long)
    predicted, logprobs, kept, vocab, like = [], [], [], 0, {}
    for a in range(0, T, step):
        block = unembed(resid[a:a + step])                                   # (≤ step, vocab)
        vocab, like = block.shape[-1], {"dtype": block.dtype, "device": block.device}
        logprobs.append(picked(block, ids[a:a + step]))
        if a + block.shape[0] > keep_from:
            kept.append(block[max(0, keep_from - a):].clone())
        if banned:                                  # allowed_logits in place: the block is read for nothing else
            block.index_fill_(-1, torch.tensor(banned, dtype=torch.long, device=block.device), float("-inf"))
        predicted += block.argmax(-1).tolist()
        del block
    kept_rows = torch.cat(kept) if kept else torch.zeros(0, vocab, **like)
    return RowLogits(unembed, resid, vocab, step, keep_from, kept_rows, predicted,
                     torch.cat(logprobs) if logprobs else torch.zeros(0))
