"""Hook points and the capture cache: every interesting tensor passes through a named identity.

Hooks are never attached to modules. They live in a context variable that is set only inside
`hooks_active(...)` and reset in `finally`, so each thread (and each call) sees only its own.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
from typing import Callable, Iterable, Iterator, Optional, Union

import torch
from torch import nn

from viz_transformer.core.hook_names import layer_name

HookFn = Callable[[torch.Tensor, "HookPoint"], Optional[torch.Tensor]]
NamesFilter = Union[None, str, Iterable[str], Callable[[str], bool]]

# name -> list of hook functions, for the current context only
_ACTIVE: contextvars.ContextVar[Optional[dict[str, list[HookFn]]]] = contextvars.ContextVar(
    "viz_transformer_active_hooks", default=None)


class HookPoint(nn.Module):
    """Identity module. Its `name` is its path in the module tree (set by `name_hook_points`).
    passes_on: the tensor it returns reaches another hook point as the same object (a block's resid_post
    is the next block's resid_pre), where a hook may change it in place."""

    def __init__(self, passes_on: bool = False) -> None:
        super().__init__()
        self.name = ""
        self.passes_on = passes_on

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        table = _ACTIVE.get()
        if table:
            for fn in table.get(self.name, ()):
                out = fn(x, self)
                if out is not None:
                    if out.shape != x.shape:
                        raise ValueError(f"hook on {self.name} returned shape {tuple(out.shape)}, "
                                         f"expected {tuple(x.shape)}")
                    x = out.to(x.device, x.dtype)    # a hook's own tensors (CPU, float32) leave the model's as they are
        return x

    def extra_repr(self) -> str:
        return self.name


def name_hook_points(root: nn.Module) -> list[str]:
    names = []
    for name, mod in root.named_modules():
        if isinstance(mod, HookPoint):
            mod.name = name
            names.append(name)
    return names


def active_hook_names() -> list[str]:
    """Names that have a hook in the current context (empty outside `hooks_active`)."""
    table = _ACTIVE.get()
    return sorted(table) if table else []


def resolve_names(filt: NamesFilter, all_names: list[str]) -> list[str]:
    """Turn a names filter (None = all, a name, a list, or a predicate) into hook names."""
    if filt is None:
        return list(all_names)
    if callable(filt):
        return [n for n in all_names if filt(n)]
    wanted = [filt] if isinstance(filt, str) else list(filt)
    known = set(all_names)
    for n in wanted:
        if n not in known:
            close = difflib.get_close_matches(n, all_names, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"unknown hook name {n!r}{hint}")
    return wanted


@contextlib.contextmanager
def hooks_active(hooks: list[tuple[str, HookFn]]) -> Iterator[None]:
    """Activate (name, fn) hooks for the code inside the `with`, in this context only."""
    outer = _ACTIVE.get()
    table: dict[str, list[HookFn]] = {k: list(v) for k, v in (outer or {}).items()}
    for name, fn in hooks:
        table.setdefault(name, []).append(fn)
    token = _ACTIVE.set(table)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


class Cache:
    """Captured tensors by hook name: detached CPU tensors that share memory with nothing else (not the
    model, not another entry), batch dimension kept."""

    def __init__(self, tensors: Optional[dict[str, torch.Tensor]] = None, n_layers: Optional[dict[str, int]] = None):
        self._t: dict[str, torch.Tensor] = dict(tensors or {})
        self.n_layers = dict(n_layers or {})   # part ("encoder"/"decoder") -> layer count
        self._owned: set[int] = set()          # storages of tensors kept without a copy

    def __getitem__(self, name: str) -> torch.Tensor:
        try:
            return self._t[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._t), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"{name!r} was not captured{hint}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._t

    def __iter__(self) -> Iterator[str]:
        return iter(self._t)

    def __len__(self) -> int:
        return len(self._t)

    def keys(self):
        return self._t.keys()

    def items(self):
        return self._t.items()

    def store(self, name: str, x: torch.Tensor, fresh: bool = False) -> None:
        """Keep x detached on the CPU, as a copy unless `fresh`: the caller vouches that nothing writes
        to x after this (the forward never does; a hook that changes a tensor returns a new one, or edits
        it in place at a later hook point only when it is passed on). A fresh tensor is kept without a
        copy (about 5% of a forward at 128 pieces, 10% at 512) when it owns its storage on the CPU and
        needs no grad, so a view (a slice of a weight or of the positional table, an expanded mask, a
        transposed head split) or a tensor already kept under another name is still copied."""
        key = x.untyped_storage().data_ptr()
        kept = x.dtype if not x.is_floating_point() else torch.float32      # bfloat16 weights: analysed as float32
        if (fresh and x._base is None and not x.requires_grad and x.device.type == "cpu" and x.dtype == kept
                and key not in self._owned):
            self._owned.add(key)
            self._t[name] = x.detach()
        else:
            self._t[name] = x.detach().to("cpu", kept, copy=True)

    def stack(self, name: str, part: str = "decoder", batch: int = 0) -> torch.Tensor:
        """Stack `{part}.{i}.{name}` over layers for one batch row: e.g. [layer, head, q, k]."""
        n = self.n_layers.get(part)
        if not n:
            raise KeyError(f"this model has no {part!r} layers")
        return torch.stack([self[layer_name(part, i, name)][batch] for i in range(n)])

    def __repr__(self) -> str:
        return f"Cache({len(self._t)} tensors)"
