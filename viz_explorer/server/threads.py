"""The app's thread policy: torch's intra-op threads, set once at start-up, whatever command started the server.

torch's default is one intra-op thread per core. A server's sessions, the browser and whatever else the machine
runs share those cores, and an OpenMP thread that finds its core taken spins waiting for it, so beside other work
a run at the default is many times slower than at one thread (`python -m benchmarks.bench_threads` measures it). So the app runs the model on one thread unless told otherwise:
VIZ_THREADS, else OMP_NUM_THREADS (as `OMP_NUM_THREADS=4 streamlit run app.py`, and deploy/serve.sh, set it).

The setting is process-wide and must come before torch's first parallel operation. app.py and serve.py call
apply() before anything imports torch (a fresh server imports it later, with its first page or in serve.py's
thread), so it goes in as OMP_NUM_THREADS, which torch reads when it is imported: no torch at start-up for this.
"""
from __future__ import annotations

import os
import sys

THREADS = 1          # measured best for a server on a shared machine (bench_threads.py; README, "Benchmarks")


def _positive(value) -> int | None:
    """The first number of an OpenMP-style value ("4", or "4,2" for nested levels), if it is a positive integer."""
    try:
        n = int(str(value).split(",")[0])
    except ValueError:
        return None
    return n if n > 0 else None


def count() -> int:
    """How many intra-op threads: VIZ_THREADS, else OMP_NUM_THREADS, else THREADS (an invalid value is ignored,
    as OpenMP ignores one)."""
    for var in ("VIZ_THREADS", "OMP_NUM_THREADS"):
        n = _positive(os.environ.get(var, ""))
        if n is not None:
            return n
    return THREADS


def apply() -> int:
    """Set the policy for this process (and the processes it starts); returns the count. Cheap, and idempotent:
    app.py calls it on every run, which matters once torch is imported: with OpenMP, torch.set_num_threads is
    the default for threads that have not used torch yet, while one that has keeps its own count."""
    n = count()
    os.environ["OMP_NUM_THREADS"] = str(n)       # torch reads it when imported
    torch = sys.modules.get("torch")             # already imported (a test, a notebook): set it directly
    if _imported(torch) and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def cores() -> int:
    """Cores this process may run on, at most 4: how many layers a long computation reads at once, each on a
    Python thread of its own with one intra-op thread (summaries.head_tables' workers). Unlike OpenMP's threads,
    such a thread does not spin when its core is taken; it waits its turn like any other."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):                # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def each(fn, items) -> list:
    """[fn(x) for x in items], up to cores() at once, each on a thread that carries the calling script's Streamlit
    context (its caches work there as in the script's own thread). For independent runs of a page (the three
    models Compare architectures runs): on an idle 2-core machine about the time of the longest, not the sum."""
    items = list(items)
    n = min(cores(), len(items))
    if n <= 1:
        return [fn(x) for x in items]
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx
    ctx = get_script_run_ctx(suppress_warning=True)

    def attach() -> None:
        if ctx is not None:
            add_script_run_ctx(threading.current_thread(), ctx)
    with ThreadPoolExecutor(n, initializer=attach) as pool:
        return list(pool.map(fn, items))


def _imported(module) -> bool:
    """Whether a module in sys.modules has finished importing. Another thread (the start-up load) may be importing
    torch right now: it is then in sys.modules without its functions, and reads OMP_NUM_THREADS itself."""
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False) and hasattr(module, "set_num_threads")
