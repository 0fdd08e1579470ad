"""One busy-loop process per core, as a context manager: a student's laptop with other work on it (the
busy machine the goals allow for). Used by benchmarks/bench_threads.py and benchmarks/pixels.py --busy."""
from __future__ import annotations

import multiprocessing as mp
import os
import time


def _spin() -> None:
    while True:
        pass


class BusyLoops:
    """One process per core spinning in pure Python while the block runs."""

    def __enter__(self):
        ctx = mp.get_context("fork")        # the child only spins: no torch, no OpenMP in it
        self.procs = [ctx.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 1)]
        for p in self.procs:
            p.start()
        time.sleep(1.0)                     # let the scheduler spread them before timing
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.join()
