"""fn over items on `workers` threads of this process, results in the items' order.

torch runs an operation on the thread that calls it, without Python's lock, one intra-op thread each (the app's
policy): work made of large tensor operations (attribution's backward passes) runs nearly `workers` times sooner on
free cores; work made of many small ones (a decoding loop) is held back by the lock and gains little. Each thread
sees only its own hooks (core/hooks.py keeps them in a ContextVar).

    for result in map_in_threads(score, sentences, workers=2): ...
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence, TypeVar

T, R = TypeVar("T"), TypeVar("R")


def map_in_threads(fn: Callable[[T], R], items: Sequence[T], workers: int = 1) -> Iterator[R]:
    """fn(item) for each item, in order; workers > 1 runs that many at once on threads of this process (at most
    `workers` items ahead of the one the caller reads). An exception is raised where its item's result would be."""
    if workers < 1:
        raise ValueError(f"workers must be 1 or more, not {workers}")
    if workers == 1 or len(items) < 2:
        yield from (fn(x) for x in items)
        return
    with ThreadPoolExecutor(min(workers, len(items))) as pool:
        ahead, nxt = [], 0
        while nxt < len(items) or ahead:
            while nxt < len(items) and len(ahead) < workers:
                ahead.append(pool.submit(fn, items[nxt]))
                nxt += 1
            yield ahead.pop(0).result()
