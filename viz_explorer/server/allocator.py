"""The C allocator under PyTorch's CPU tensors (glibc malloc on Linux): give freed memory back to the system.

A long-lived process that makes and drops many large tensors (a server caching runs) otherwise keeps the
freed pages: glibc raises its mmap threshold after the first frees, so later tensors of a few MiB land in
the heap, where freed holes are not returned. Both functions are no-ops without glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator, Optional

M_MMAP_THRESHOLD = -3            # mallopt parameter numbers, from glibc's malloc.h
M_TRIM_THRESHOLD = -1
TRIM_DEFAULT = 128 * 1024        # glibc's M_TRIM_THRESHOLD, which fix_mmap_threshold leaves as it is


@lru_cache(maxsize=1)
def _libc() -> Optional[ctypes.CDLL]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim, libc.mallopt      # noqa: B018 - glibc only
        return libc
    except (OSError, AttributeError):
        return None


def fix_mmap_threshold(nbytes: int = 1 << 20) -> bool:
    """Allocations of at least nbytes get their own mapping, returned to the system when freed (this also
    stops glibc from raising the threshold as tensors are freed). True if the allocator took it."""
    libc = _libc()
    return bool(libc and libc.mallopt(M_MMAP_THRESHOLD, int(nbytes)))


def release_free_memory() -> bool:
    """Return the free pages of every malloc arena to the system (malloc_trim(0)). True if any were."""
    libc = _libc()
    return bool(libc and libc.malloc_trim(0))


class _MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (glibc 2.33 on), field for field."""
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap() -> Optional[dict]:
    """glibc's own account in bytes, summed over its arenas: `heap` (the arenas' address space), `in_use`, `free`
    (freed chunks the arenas keep: release_free_memory hands their whole pages back, so fewer are resident),
    `mapped` (blocks in mappings of their own: tensors of 1 MiB and more); None without glibc 2.33's mallinfo2.
    Python's small objects live in its own arenas, mapped directly: none of these counts them."""
    libc = _libc()
    fn = getattr(libc, "mallinfo2", None) if libc else None
    if fn is None:
        return None
    fn.restype = _MallInfo2
    info = fn()
    return {"heap": info.arena, "in_use": info.uordblks, "free": info.fordblks, "mapped": info.hblkhd,
            "arenas_free_chunks": info.ordblks}


_scratch_lock, _scratch_users = threading.Lock(), [0]


@contextmanager
def scratch(nbytes: int = 64 << 20) -> Iterator[None]:
    """Within: allocations below nbytes reuse the heap's freed memory instead of new mappings, whose fresh pages
    the kernel must fault in and zero for every temporary (a long text's Head statistics make thousands of 7 MB
    blocks, each of them on fresh pages under the fixed 1 MiB threshold). On leaving (the last of
    several threads to leave), the threshold is fixed again and the free pages given back."""
    libc = _libc()
    with _scratch_lock:
        _scratch_users[0] += 1
        if libc and _scratch_users[0] == 1:
            libc.mallopt(M_MMAP_THRESHOLD, int(nbytes))
            libc.mallopt(M_TRIM_THRESHOLD, 2 * int(nbytes))
    try:
        yield
    finally:
        with _scratch_lock:
            _scratch_users[0] -= 1
            if libc and _scratch_users[0] == 0:
                libc.mallopt(M_TRIM_THRESHOLD, TRIM_DEFAULT)
                fix_mmap_threshold()
                release_free_memory()
