"""A memo bounded in bytes, not entries: least recently used first out, shared by threads.

    memo = ByteLRU(256 << 20)                       # 256 MiB of tensors, arrays, tables and strings
    run = memo.get(("run", path, text), lambda: hm.run(text))
"""
from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional

import numpy as np
import torch


def nbytes(obj: Any) -> int:
    """Bytes an object holds in tensors (each storage once, views included), numpy arrays, pandas tables,
    strings and bytes, found through containers, dataclasses and instance attributes. Small Python
    objects (numbers, the containers themselves) are not counted: this is the memory that grows with a text."""
    seen: set = set()
    total = 0
    stack = [obj]
    while stack:
        x = stack.pop()
        if x is None or isinstance(x, (bool, int, float, complex)) or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, torch.Tensor):
            storage = x.untyped_storage()
            key = ("storage", storage.data_ptr(), storage.nbytes())
            if key not in seen:
                seen.add(key)
                total += storage.nbytes()
        elif isinstance(x, np.ndarray):
            base = x if x.base is None else x.base
            key = ("array", id(base))
            if key not in seen:
                seen.add(key)
                total += base.nbytes if isinstance(base, np.ndarray) else x.nbytes
        elif isinstance(x, (str, bytes, bytearray)):
            total += sys.getsizeof(x)
        elif hasattr(x, "memory_usage") and hasattr(x, "to_numpy"):       # a pandas DataFrame or Series
            usage = x.memory_usage(deep=True)
            total += int(usage.sum() if hasattr(usage, "sum") else usage)
            stack.extend(getattr(x, "attrs", {}).values())
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
        else:
            stack.extend(getattr(x, "__dict__", {}).values())
            stack.extend(getattr(x, s) for s in getattr(type(x), "__slots__", ()) if hasattr(x, s))
    return total


class _Gate:
    """One key being computed: the lock its waiters queue on, and the error they are handed."""
    __slots__ = ("lock", "error")

    def __init__(self):
        self.lock, self.error = threading.Lock(), None


class ByteLRU:
    """key -> value, at most `budget` bytes (by `sizeof`) in all, a budget that never changes; the least
    recently used go first (those put `lasting` last).

    `get(key, compute)` returns the kept value or computes it once: threads asking for the same missing key
    wait for the one computing it. A value larger than the whole budget is returned but not kept. An
    exception is raised to the caller that computed and to every caller that was waiting for it (one failure,
    not one per waiter), and nothing is kept; a later call computes again. `on_evict()` runs after values were
    dropped, outside the lock (e.g. to hand freed memory back to the system)."""

    def __init__(self, budget: int, sizeof: Callable[[Any], int] = nbytes,
                 on_evict: Optional[Callable[[], None]] = None):
        if budget < 0:
            raise ValueError(f"budget must be >= 0 bytes, got {budget}")
        self.budget, self.sizeof, self.on_evict = int(budget), sizeof, on_evict
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()   # oldest use first
        self._lasting: set = set()      # keys put lasting: evicted only when no other value is left
        self._computing: dict[Hashable, _Gate] = {}
        self._lock = threading.Lock()
        self.total = 0                  # bytes kept now
        self.hits = self.misses = self.evictions = self.refused = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def keys(self) -> list:
        """Keys, least recently used first."""
        with self._lock:
            return list(self._entries)

    def _lookup(self, key: Hashable):
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return True, self._entries[key][0]
            return False, None

    def peek(self, key: Hashable) -> Any:
        """The value kept under key (counted as a use), or None: nothing is computed."""
        return self._lookup(key)[1]

    def get(self, key: Hashable, compute: Callable[[], Any], lasting: bool = False) -> Any:
        """The value kept under key, or compute() kept (see put for `lasting`)."""
        found, value = self._lookup(key)
        if found:
            return value
        with self._lock:
            gate = self._computing.get(key)
            if gate is None:
                gate = self._computing[key] = _Gate()
        with gate.lock:                              # one thread computes a key; the others wait for it
            if gate.error is not None:               # the one before failed: the same failure, not a new try
                raise gate.error
            found, value = self._lookup(key)
            if found:
                return value
            try:
                value = compute()
                self.put(key, value, lasting)
            except BaseException as e:
                gate.error = e
                raise
            finally:
                with self._lock:
                    if self._computing.get(key) is gate:
                        del self._computing[key]
            with self._lock:
                self.misses += 1
            return value

    def put(self, key: Hashable, value: Any, lasting: bool = False) -> bool:
        """Keep value under key (evicting the least recently used to fit). False if it is larger than the budget:
        then it is not kept, and nothing is evicted for it. lasting: the value is evicted only after every value
        put without it (a text's run, which every page reads, outlives the page results computed from it)."""
        size = self.sizeof(value)
        with self._lock:
            old = self._entries.pop(key, None)
            self._lasting.discard(key)
            if old is not None:
                self.total -= old[1]
            dropped = old is not None
            kept = size <= self.budget
            if kept:
                while self._entries and self.total + size > self.budget:
                    victim = next((k for k in self._entries if k not in self._lasting), next(iter(self._entries)))
                    _, s = self._entries.pop(victim)
                    self._lasting.discard(victim)
                    self.total -= s
                    self.evictions += 1
                    dropped = True
                self._entries[key] = (value, size)
                if lasting:
                    self._lasting.add(key)
                self.total += size
            else:
                self.refused += 1
        if dropped and self.on_evict is not None:
            self.on_evict()
        return kept

    def clear(self) -> None:
        with self._lock:
            had = bool(self._entries)
            self._entries.clear()
            self._lasting.clear()
            self.total = 0
        if had and self.on_evict is not None:
            self.on_evict()

    def stats(self) -> dict:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self.total, "budget": self.budget, "hits": self.hits,
                    "misses": self.misses, "evictions": self.evictions, "refused": self.refused}
