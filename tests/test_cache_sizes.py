"""server.cache_sizes: what a soak benchmark reads of the server (VIZ_STATS_FILE). It lists none of the collector's
objects: gc.get_objects() in one session's thread holds a reference to a tuple another session's thread is still
building from a generator, and CPython's tuple() then fails there with SystemError (seen in bench_soak: four pages
failed at one write)."""
from __future__ import annotations

import gc
import json
from pathlib import Path

from viz_explorer.server import cache_sizes, cached


def test_the_stats_list_none_of_the_collectors_objects(monkeypatch, tmp_path):
    def refuse(*a, **k):
        raise AssertionError("gc.get_objects() holds every tracked object, tuples under construction too")
    monkeypatch.setattr(gc, "get_objects", refuse)
    monkeypatch.setattr(gc, "get_referrers", refuse)
    monkeypatch.setenv("VIZ_STATS_FILE", str(tmp_path / "stats.json"))
    monkeypatch.setattr(cache_sizes, "_last", [0.0])
    cache_sizes.write_if_asked()
    got = json.loads((tmp_path / "stats.json").read_text(encoding="utf-8"))
    assert got["memo"] == json.loads(json.dumps(cached.memo().stats()))       # the memo's own account
    assert len(got["gc_counts"]) == 3 and all(isinstance(c, int) and c >= 0 for c in got["gc_counts"])   # per generation


def test_nothing_is_written_or_computed_unasked(monkeypatch, tmp_path):
    monkeypatch.delenv("VIZ_STATS_FILE", raising=False)
    monkeypatch.setattr(cache_sizes, "sizes", lambda: (_ for _ in ()).throw(AssertionError("computed")))
    monkeypatch.setattr(cache_sizes, "_last", [0.0])
    cache_sizes.write_if_asked()
    assert not list(tmp_path.iterdir())


def test_the_heap_account_follows_what_is_allocated_and_freed():
    """allocator.heap() against a known allocation: 64 MiB in 4 KiB tensors (each below the mmap threshold, so in the
    heap) raises in_use by at least that much, and freeing them lowers it again."""
    import pytest
    import torch
    from viz_explorer.server import allocator
    if allocator.heap() is None:
        pytest.skip("no glibc mallinfo2 here")
    before = allocator.heap()["in_use"]
    blocks = [torch.empty(1024) for _ in range(16384)]            # 16,384 x 4 KiB = 64 MiB
    held = allocator.heap()["in_use"]
    del blocks
    after = allocator.heap()["in_use"]
    assert held - before >= 64 << 20
    assert held - after >= 64 << 20


def test_a_held_models_bytes_are_its_tensors_in_memory(monkeypatch):
    """loaded_model_bytes against the model's own parameters and buffers: a checkpoint saved in 16 bits is held as
    float32, twice its file's tensors."""
    from viz_explorer.server.byte_lru import ByteLRU
    monkeypatch.setattr(cached, "memo", lambda: ByteLRU(0))
    path = Path(__file__).resolve().parent.parent / "checkpoints" / "zh-en-postnorm"
    hm = cached.load_model(str(path), cached.folder_stamp(path))
    want = sum(t.numel() * t.element_size() for t in {id(t): t for t in [*hm.model.parameters(), *hm.model.buffers()]}.values())
    assert cached.loaded_model_bytes()[str(path)] == want
    assert want > 1.9 * (path / "model.safetensors").stat().st_size      # float32 from a 16-bit file


def test_pythons_arenas_follow_small_objects_made_and_freed():
    """python_arenas against a known allocation, in a fresh interpreter (a test worker's other threads and the
    collector free objects meanwhile): 200,000 empty dicts (pymalloc's) raise the bytes in its blocks by at least
    200,000 x sys.getsizeof({}) but for the few Python keeps for reuse, and dropping them lowers it again; what the
    process writes to stderr afterwards still arrives."""
    import subprocess
    import sys
    script = (
        "import sys\n"
        "from viz_explorer.server.cache_sizes import python_arenas\n"
        "before = python_arenas()\n"
        "objs = [{} for _ in range(200_000)]\n"
        "held = python_arenas()\n"
        "del objs\n"
        "after = python_arenas()\n"
        "print(before['in_blocks'], held['in_blocks'], after['in_blocks'], held['arenas'], held['free_in_pools'],"
        " sys.getsizeof({}))\n"
        "print('stderr restored', file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    before, held, after, arenas, free, size = map(int, done.stdout.split())
    need = 200_000 * size
    assert held - before >= 0.99 * need
    assert held - after >= 0.99 * need
    assert arenas >= held + free
    assert done.stderr.strip().endswith("stderr restored")


def test_anonymous_regions_add_up_to_the_kernels_count_and_see_a_thread_arena():
    """procfs.anon_regions_mib against /proc's own RssAnon (status): the regions sum to it within 2 MiB (both read
    now), and 160 MiB of 4 KiB tensors made in a new thread land in a thread arena, not in [heap] (more than the free
    room an arena left by an earlier thread could hold)."""
    import threading
    import torch
    from benchmarks.procfs import anon_regions_mib, rss_parts_mib
    regions, anon = anon_regions_mib(), rss_parts_mib()["anon"]
    assert abs(sum(regions.values()) - anon) < 2 + 0.01 * anon
    held = {}
    thread = threading.Thread(target=lambda: held.setdefault("x", [torch.ones(1024) for _ in range(40960)]))
    thread.start()
    thread.join()
    grown = anon_regions_mib()
    assert grown["thread_arenas"] - regions["thread_arenas"] >= 100
    assert grown["main_arena"] - regions["main_arena"] < 8


def test_weights_mapped_from_their_file_are_counted_as_mapped(tmp_path):
    """procfs.mapped_files_mib against a file of known size: a 32 MiB safetensors file opened with safe_open, every
    tensor read and touched, puts about its size in resident pages of that mapping (safetensors keeps the tensors in
    the file's pages); none before."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file
    from benchmarks.procfs import mapped_files_mib
    path = tmp_path / "w.safetensors"
    save_file({f"w{i}": torch.rand(1024, 1024) for i in range(8)}, str(path))       # 8 x 4 MiB
    before = mapped_files_mib(suffix="w.safetensors")
    with safe_open(str(path), framework="pt") as f:
        ts = [f.get_tensor(k) for k in f.keys()]
    total = sum(float(t.sum()) for t in ts)                                           # every page read
    assert total > 0 and before == 0
    assert 28 <= mapped_files_mib(suffix="w.safetensors") <= 33


TRACE_SCRIPT = r'''
import gc, json, os, sys, tracemalloc
from viz_explorer.server import cache_sizes
path = os.environ["VIZ_STATS_FILE"]
cache_sizes.write_if_asked()                       # the stats' own imports made, as in a server that has served
open(path + cache_sizes.TRACE, "w").close()
cache_sizes.write_if_asked()
assert tracemalloc.is_tracing()
kept = ["%06d" % i + "x" * 94 for i in range(50_000)]                  # KEPT_LINE
class Cycle:
    pass
c = Cycle(); c.me = c; c.load = ["%06d" % i + "y" * 94 for i in range(50_000)]   # GARBAGE_LINE
del c
open(path + cache_sizes.SNAP, "w").close()
cache_sizes.write_if_asked()
assert not tracemalloc.is_tracing()
cache_sizes.write_if_asked()                       # the flag is still there: a trace is made once
assert not tracemalloc.is_tracing()
print(json.dumps({"kept": sum(sys.getsizeof(s) for s in kept) + sys.getsizeof(kept)}))
'''


def test_a_trace_names_what_was_made_after_it_started_and_is_still_alive(tmp_path):
    """trace_if_asked against an independent count: 50,000 strings kept alive are found at the line that made them,
    with their bytes (sys.getsizeof), and as many made into a garbage cycle are not (collected before the snapshot);
    the trace is made once. In a fresh interpreter: tracing a test worker would slow every test after it."""
    import os
    import subprocess
    import sys
    stats = tmp_path / "stats.json"
    env = dict(os.environ, VIZ_STATS_FILE=str(stats))
    out = subprocess.run([sys.executable, "-c", TRACE_SCRIPT], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert out.returncode == 0, out.stderr
    kept = json.loads(out.stdout.strip().splitlines()[-1])["kept"]
    snap = json.loads(Path(str(stats) + cache_sizes.TRACED).read_text(encoding="utf-8"))
    lines = TRACE_SCRIPT.splitlines()
    kept_at = f"<string>:{next(i + 1 for i, ln in enumerate(lines) if 'KEPT_LINE' in ln)}"
    garbage_at = f"<string>:{next(i + 1 for i, ln in enumerate(lines) if 'GARBAGE_LINE' in ln)}"
    sites = {s["at"]: s for s in snap["top"]}
    assert sites[kept_at]["blocks"] >= 50_000
    assert abs(sites[kept_at]["bytes"] - kept) <= 0.05 * kept
    assert garbage_at not in sites
    assert snap["bytes"] >= sites[kept_at]["bytes"]
