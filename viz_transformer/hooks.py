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

from .names import layer_name

HookFn = Callable[[torch.Tensor, "HookPoint"], Optional[torch.Tensor]]
NamesFilter = Union[None, str, Iterable[str], Callable[[str], bool]]

# name -> list of hook functions, for the current context only
_ACTIVE: contextvars.ContextVar[Optional[dict[str, list[HookFn]]]] = contextvars.ContextVar(
    "viz_transformer_active_hooks", default=None)


class HookPoint(nn.Module):
    """Identity module. Its `name` is its path in the module tree (set by `name_hook_points`)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        table = _ACTIVE.get()
        if table:
            for fn in table.get(self.name, ()):
                out = fn(x, self)
                if out is not None:
                    if out.shape != x.shape:
                        raise ValueError(f"hook on {self.name} returned shape {tuple(out.shape)}, "
                                         f"expected {tuple(x.shape)}")
                    x = out
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
    """Captured tensors by hook name: detached CPU copies, batch dimension kept."""

    def __init__(self, tensors: Optional[dict[str, torch.Tensor]] = None, n_layers: Optional[dict[str, int]] = None):
        self._t: dict[str, torch.Tensor] = dict(tensors or {})
        self.n_layers = dict(n_layers or {})   # part ("encoder"/"decoder") -> layer count

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

    def store(self, name: str, x: torch.Tensor) -> None:
        self._t[name] = x.detach().to("cpu", copy=True)

    def stack(self, name: str, part: str = "decoder", batch: int = 0) -> torch.Tensor:
        """Stack `{part}.{i}.{name}` over layers for one batch row: e.g. [layer, head, q, k]."""
        n = self.n_layers.get(part)
        if not n:
            raise KeyError(f"this model has no {part!r} layers")
        return torch.stack([self[layer_name(part, i, name)][batch] for i in range(n)])

    def __repr__(self) -> str:
        return f"Cache({len(self._t)} tensors)"
