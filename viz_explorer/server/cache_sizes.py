"""What the server holds now, for a benchmark that watches it from outside: the memo's entries and bytes against its
budget, the models loaded, the garbage collections made. With VIZ_STATS_FILE set, each page run writes it there as JSON
(at most every WRITE_S seconds); unset, nothing is written and nothing is computed. Nothing here lists the
collector's objects (gc.get_objects): that list holds a reference to a tuple another session's thread is still
building, and CPython's tuple() then fails in that thread ("bad argument to internal function"), a visitor's page."""
from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from pathlib import Path

WRITE_S = 5.0
TRACE_TOP = 25                      # allocation sites written by trace_if_asked
TRACE, SNAP, TRACED = ".trace", ".snap", ".snap.json"     # trace_if_asked's files: the stats file's name + these
_last = [0.0]
_lock = threading.Lock()


def trace_if_asked(path: str) -> None:
    """A benchmark's trace of what stays alive (benchmarks/bench_soak.py --trace), driven by files beside the
    stats file: PATH.trace appears -> Python's allocations are traced from now on (one frame each: a deeper
    traceback made page runs many times slower); PATH.snap appears -> after a full collection, where the
    allocations made since then and alive now were made, largest first, is written to PATH.snap.json and the
    tracing stops. A snapshot is never taken on a timer: under tracing it holds the interpreter for seconds."""
    import tracemalloc
    if not tracemalloc.is_tracing():
        if os.path.exists(path + TRACE) and not os.path.exists(path + TRACED):
            tracemalloc.start(1)
        return
    if not os.path.exists(path + SNAP):
        return
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = snapshot.statistics("lineno")
    top = [{"at": f"{s.traceback[0].filename}:{s.traceback[0].lineno}", "bytes": s.size, "blocks": s.count}
           for s in stats[:TRACE_TOP]]
    _write_json(path + TRACED, {"bytes": sum(s.size for s in stats), "blocks": sum(s.count for s in stats),
                                "top": top})


def _write_json(path: str, data) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)                      # a reader never sees half a file


_stderr_lock = threading.Lock()


def python_arenas() -> dict:
    """Python's own allocator (its small objects, in arenas of 1 MiB it maps itself), bytes: `arenas` (mapped now),
    `in_blocks` (objects alive), `free_in_pools`, `unused_pools` (free room the arenas keep: an arena is unmapped only
    once every object in it is gone). Read from sys._debugmallocstats, which writes to the process's stderr: it is
    pointed at a file for the call. Every value is None while tracemalloc traces (Python then prints no statistics)."""
    import re
    import tempfile
    with _stderr_lock, tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", "replace")
    num = lambda pattern: int(m.group(1).replace(",", "")) if (m := re.search(pattern, text)) else None  # noqa: E731
    return {"arenas": num(r"arenas \* \d+ bytes/arena\s*=\s*([\d,]+)"),
            "in_blocks": num(r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
            "free_in_pools": num(r"# bytes in available blocks\s*=\s*([\d,]+)"),
            "unused_pools": num(r"unused pools \* \d+ bytes\s*=\s*([\d,]+)")}


def sizes() -> dict:
    from viz_explorer.server import allocator, cached, memory
    return {"heap": allocator.heap(), "python_arenas": python_arenas(), "at": time.time(),
            "memo": cached.memo().stats(), "models_held": sorted(p for p, _ in cached.loaded_models()),
            "models_bytes": cached.loaded_model_bytes(),
            "collections": memory.stats(), "gc_counts": gc.get_count(), "gc_frozen": gc.get_freeze_count(),
            "threads": threading.active_count(), "modules": sorted(sys.modules)}


def write_if_asked() -> None:
    path = os.environ.get("VIZ_STATS_FILE", "").strip()
    if not path or not _lock.acquire(blocking=False):
        return
    try:
        trace_if_asked(path)
        if time.monotonic() - _last[0] < WRITE_S:
            return
        _last[0] = time.monotonic()
        _write_json(path, sizes())
    except OSError:
        pass                               # a benchmark's file: never the page's problem
    finally:
        _lock.release()
