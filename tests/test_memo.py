"""The byte-bounded memo (viz_explorer.server.byte_lru): sizes against an independent count (tensor.nbytes,
ndarray.nbytes), least-recently-used eviction against a reference model, one computation per key
under threads, and the budget never exceeded."""
from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import torch

from viz_explorer.server.byte_lru import ByteLRU, nbytes


@dataclass
class Holder:
    a: torch.Tensor
    rest: dict


def test_nbytes_counts_tensors_arrays_and_tables_once():
    x = torch.zeros(100, 7)                      # 2800 bytes
    y = torch.ones(3, 5, dtype=torch.float16)    # 30 bytes
    arr = np.zeros((4, 4), dtype=np.float64)     # 128 bytes
    df = pd.DataFrame({"v": np.arange(10, dtype=np.int64)})
    assert nbytes(x) == x.numel() * x.element_size()
    assert nbytes([x, x, x[2:5], x.t()]) == 2800                  # views share one storage
    assert nbytes(Holder(x, {"k": (y, [arr, arr[1:]])})) == 2800 + 30 + 128 + nbytes("k")   # a key is a string
    assert nbytes({"t": df}) == int(df.memory_usage(deep=True).sum()) + nbytes("t")
    assert nbytes(None) == 0 and nbytes(3.5) == 0


class Slotted:
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t


def test_nbytes_follows_slots_and_attributes():
    t = torch.zeros(64)
    obj = type("Plain", (), {})()
    obj.inner = Slotted(t)
    assert nbytes(obj) == 256


def _tensor(n_bytes: int) -> torch.Tensor:
    return torch.zeros(n_bytes, dtype=torch.uint8)


def test_lru_order_and_byte_budget_match_a_reference():
    """Random gets of random-sized values: the kept keys and total bytes equal a simple reference LRU."""
    rng = random.Random(0)
    budget = 1000
    memo, ref, ref_total = ByteLRU(budget), OrderedDict(), 0
    sizes = {k: rng.randint(1, 400) for k in range(30)}
    for _ in range(2000):
        k = rng.randrange(30)
        got = memo.get(k, lambda: _tensor(sizes[k]))
        assert got.numel() == sizes[k]
        if k in ref:
            ref.move_to_end(k)
        else:
            while ref and ref_total + sizes[k] > budget:
                _, s = ref.popitem(last=False)
                ref_total -= s
            ref[k] = sizes[k]
            ref_total += sizes[k]
        assert memo.keys() == list(ref)
        assert memo.total == ref_total == sum(nbytes(memo._entries[k][0]) for k in memo.keys()) <= budget


def test_value_larger_than_budget_is_returned_not_kept():
    memo = ByteLRU(100)
    memo.get("small", lambda: _tensor(50))
    big = memo.get("big", lambda: _tensor(101))
    assert big.numel() == 101 and "big" not in memo and "small" in memo and memo.total == 50


def test_errors_are_not_kept_and_eviction_calls_the_hook():
    calls = []
    memo = ByteLRU(10, on_evict=lambda: calls.append(1))

    def boom():
        raise ValueError("no")
    with pytest.raises(ValueError):
        memo.get("k", boom)
    assert "k" not in memo and memo.get("k", lambda: _tensor(8)).numel() == 8
    assert calls == []
    memo.get("j", lambda: _tensor(8))                   # evicts k
    assert calls == [1] and memo.keys() == ["j"]
    with pytest.raises(ValueError):
        ByteLRU(-1)


def test_threads_compute_each_key_once_and_stay_within_budget():
    memo = ByteLRU(64 * 100)
    computed, lock = [], threading.Lock()
    errors = []

    def compute(k):
        with lock:
            computed.append(k)
        time.sleep(0.002)
        return _tensor(100 + k)

    def worker(seed):
        rng = random.Random(seed)
        try:
            for _ in range(300):
                k = rng.randrange(20)
                assert memo.get(k, lambda: compute(k)).numel() == 100 + k
                assert memo.total <= memo.budget
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    # first, 16 threads ask for one missing key at once: one computation
    barrier = threading.Barrier(16)

    def first():
        barrier.wait()
        memo.get("same", lambda: compute(-1))
    threads = [threading.Thread(target=first) for _ in range(16)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert computed.count(-1) == 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    assert memo.total == sum(nbytes(v) for v, _ in memo._entries.values()) <= memo.budget
    s = memo.stats()
    assert s["hits"] + s["misses"] == 16 + 8 * 300 and s["misses"] == len(computed)


def test_the_budget_never_grows():
    """A value larger than the budget is returned and refused, lasting or not; the budget is what was configured."""
    memo = ByteLRU(100)
    memo.get("small", lambda: _tensor(50))
    big = memo.get("big", lambda: _tensor(101), lasting=True)
    assert big.numel() == 101 and "big" not in memo and "small" in memo     # nothing was evicted for it either
    assert memo.budget == 100 and memo.stats()["refused"] == 1 and memo.total == 50


def test_a_failure_is_handed_to_every_waiter_once():
    """8 threads ask for a key whose computation fails: it runs once and all 8 get its error; a later call tries again."""
    memo, calls, barrier = ByteLRU(1000), [], threading.Barrier(8)
    started = threading.Event()

    def boom():
        calls.append(1)
        started.set()
        time.sleep(0.3)                                            # the others are queued on the key by now
        raise ValueError("this text breaks the model")

    errors = []

    def ask():
        barrier.wait()
        try:
            memo.get("k", boom)
        except ValueError as e:
            errors.append(str(e))
    threads = [threading.Thread(target=ask) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(calls) == 1 and errors == ["this text breaks the model"] * 8 and "k" not in memo
    assert memo.get("k", lambda: _tensor(3)).numel() == 3          # no failure is kept: the next ask computes


def test_peek_reads_without_computing_and_counts_as_a_use():
    memo = ByteLRU(200)
    memo.get("a", lambda: _tensor(50))
    memo.get("b", lambda: _tensor(50))
    assert memo.peek("missing") is None and "missing" not in memo           # nothing computed, nothing kept
    assert torch.equal(memo.peek("a"), _tensor(50))
    assert list(memo.keys()) == ["b", "a"]                                 # "a" was used last
    memo.get("c", lambda: _tensor(101))                                    # 50 + 50 + 101 > 200: the older goes
    assert "b" not in memo and "a" in memo


def test_lasting_values_go_after_every_other_value():
    """A run (put lasting) outlives the page results put after it, although it was used less recently;
    among runs, and among the rest, the least recently used goes first."""
    memo = ByteLRU(100)
    memo.get("run", lambda: _tensor(60), lasting=True)
    memo.get("a", lambda: _tensor(20))
    memo.get("b", lambda: _tensor(10))
    memo.get("c", lambda: _tensor(25))                             # 60 + 20 + 10 + 25 > 100: "a" goes, not "run"
    assert list(memo.keys()) == ["run", "b", "c"] and memo.total == 95
    memo.get("run2", lambda: _tensor(60), lasting=True)           # only room for it: the rest, then "run", go
    assert list(memo.keys()) == ["run2"] and memo.total == 60
