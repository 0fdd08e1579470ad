"""server.cache_sizes: what a soak benchmark reads of the server (VIZ_STATS_FILE). It lists none of the collector's
objects: gc.get_objects() in one session's thread holds a reference to a tuple another session's thread is still
building from a generator, and CPython's tuple() then fails there with SystemError (seen in bench_soak: four pages
failed at one write)."""
from __future__ import annotations

import gc
import json

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
    from pathlib import Path
    from viz_explorer.server.byte_lru import ByteLRU
    monkeypatch.setattr(cached, "memo", lambda: ByteLRU(0))
    path = Path(__file__).resolve().parent.parent / "checkpoints" / "zh-en-postnorm"
    hm = cached.load_model(str(path), cached.folder_stamp(path))
    want = sum(t.numel() * t.element_size() for t in {id(t): t for t in [*hm.model.parameters(), *hm.model.buffers()]}.values())
    assert cached.loaded_model_bytes()[str(path)] == want
    assert want > 1.9 * (path / "model.safetensors").stat().st_size      # float32 from a 16-bit file
