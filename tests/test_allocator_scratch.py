"""viz_explorer.server.allocator.scratch: raises glibc's mmap and trim thresholds while any thread is inside, and on
the last one's leaving fixes the 1 MiB threshold again, puts the trim threshold back and gives the free pages back
(checked on a recording stand-in for libc; the real effect, 14 -> 5 CPU s for a 2,048-piece text's Head statistics,
is measured by benchmarks/head_stats_cpu.py, not timed here)."""
from __future__ import annotations

import pytest

from viz_explorer.server import allocator


class FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.fixture
def libc(monkeypatch):
    fake = FakeLibc()
    monkeypatch.setattr(allocator, "_libc", lambda: fake)
    return fake


RAISED = [("mallopt", -3, 8 << 20), ("mallopt", -1, 16 << 20)]
RESTORED = [("mallopt", -1, 128 * 1024), ("mallopt", -3, 1 << 20), ("malloc_trim", 0)]


def test_nested_users_raise_once_and_the_last_restores(libc):
    with allocator.scratch(8 << 20):
        assert libc.calls == RAISED
        with allocator.scratch(8 << 20):            # a second session's computation meanwhile: nothing changes
            assert libc.calls == RAISED
        assert libc.calls == RAISED                 # one still inside
    assert libc.calls == RAISED + RESTORED


def test_restored_when_the_computation_raises(libc):
    with pytest.raises(ValueError):
        with allocator.scratch(8 << 20):
            raise ValueError("bad text")
    assert libc.calls == RAISED + RESTORED
    with allocator.scratch(8 << 20):                # and the next user raises it again
        pass
    assert libc.calls == (RAISED + RESTORED) * 2


def test_without_glibc_it_does_nothing(monkeypatch):
    monkeypatch.setattr(allocator, "_libc", lambda: None)
    with allocator.scratch():
        pass
    assert allocator._scratch_users[0] == 0
