"""Work over a corpus spread over Ray (`--ray [ADDRESS]` on stats, attribution and evaluate): one actor per worker
loads the checkpoint once, the corpus is cut into runs and each run handed to a free actor, which calls one function
of this package on the model and its run; the results come back in the runs' order, for the caller to combine. Ray
is an optional extra (`pip install .[ray]`), imported on first use; nothing else here needs it.

    parts = map_runs("checkpoints/zh-en", "viz_transformer.analysis.summaries:corpus_head_stats", texts, 16, workers=2)
    parts = map_runs(path, fn, texts, address="ray://head:10001")      # a cluster, every CPU it has: [(n, result)]
"""
from __future__ import annotations

import importlib
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

RUNS_PER_WORKER = 4          # runs handed out per worker: a slow run does not hold the others back
_lock = threading.Lock()     # one Ray connection per process, shared by the callers at work (the app's jobs)
_users = 0
_ours = False                # whether this module started it (a Ray started by its caller is left running)


def split(items: Sequence, parts: int, unit: int = 1) -> list[list]:
    """Consecutive runs of the items, each a whole number of `unit`s (the last may be shorter), at most `parts`:
    a function that batches its items `unit` at a time sees the same batches in the runs as in the whole."""
    units = [list(items[i:i + unit]) for i in range(0, len(items), unit)]
    per = -(-len(units) // max(1, parts))
    return [sum(units[i:i + per], []) for i in range(0, len(units), per)]


class RayUnavailable(ValueError):
    """Ray is not installed here, or cannot be started or reached at the address given."""


def function(name: str) -> Callable:
    """`module:function` of this package, as a worker finds it."""
    module, _, attr = name.partition(":")
    if not module.startswith("viz_transformer.") or not attr:
        raise ValueError(f"not a function of this package: {name!r}")
    return getattr(importlib.import_module(module), attr)


class _Worker:
    """One Ray worker: the model loaded once, one run at a time."""

    def __init__(self, checkpoint: str):
        import torch
        from viz_transformer.run.capture import load_checkpoint
        torch.set_num_threads(1)                  # one CPU a worker, as Ray counts them
        self.hm = load_checkpoint(checkpoint)

    def call(self, name: str, run: list, kwargs: dict) -> Any:
        return function(name)(self.hm, run, **kwargs)


def map_runs(checkpoint, name: str, items: Sequence, unit: int = 1, address: Optional[str] = None,
             workers: Optional[int] = 2, progress: Optional[Callable[[int, int], None]] = None,
             pack: Optional[Callable[[list], Any]] = None, **kwargs) -> list[tuple[int, Any]]:
    """The items cut into runs of whole `unit`s (split: RUNS_PER_WORKER runs per worker), and for each run
    (its length, function(name)(load_checkpoint(checkpoint), pack(run), **kwargs)), in the runs' order, computed by
    Ray actors: `workers` of them (None: one per CPU of the cluster), on the cluster at `address` (its nodes need this
    package and the checkpoint at the same path), else on a Ray started here with `workers` CPUs. progress(items done,
    items) after each run comes back. No Ray here, or one that cannot be started or reached: RayUnavailable, in one
    line."""
    function(name)                                 # a wrong name fails here, not in every worker
    with session(address, workers):
        import ray
        n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        runs = split(items, n * RUNS_PER_WORKER, unit)
        pool = [ray.remote(num_cpus=1)(_Worker).remote(str(checkpoint)) for _ in range(min(n, len(runs)))]
        pending = {pool[i % len(pool)].call.remote(name, pack(run) if pack else run, kwargs): i
                   for i, run in enumerate(runs)}
        out: dict[int, Any] = {}
        done, total = 0, len(items)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            out[i] = ray.get(ready[0])
            done += len(runs[i])
            if progress is not None:
                progress(done, total)
        return [(len(runs[i]), out[i]) for i in range(len(runs))]


@contextmanager
def session(address: Optional[str] = None, workers: Optional[int] = 2):
    """One Ray connection held across several map_runs calls (a command reading its corpus a chunk at a time), so
    Ray starts once; RayUnavailable as map_runs."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable("Ray is not installed here: pip install .[ray] (ray==2.60.0)") from None
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be 1 or more, not {workers}")
    with _connected(ray, address, workers):
        yield


@contextmanager
def _connected(ray, address: Optional[str], workers: Optional[int]):
    """Ray started or reached for the callers at work, shut down when the last of them is done (if started here)."""
    global _users, _ours
    with _lock:
        if _users == 0 and not ray.is_initialized():
            root = str(Path(__file__).resolve().parents[2])
            try:
                ray.init(address=address or None, num_cpus=None if address else (workers or 2), include_dashboard=False,
                         log_to_driver=False, runtime_env=None if address else {"env_vars": {"PYTHONPATH": root}})
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise RayUnavailable(f"cannot start or reach Ray at {address or 'this machine'}: "
                                     f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
            _ours = True
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _ours:
                ray.shutdown()
                _ours = False
