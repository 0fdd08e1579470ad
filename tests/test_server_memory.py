"""viz_explorer.server.memory: the garbage page runs leave behind (reference cycles) is collected soon after a run, also
when a run ends too soon after the last collection and nothing runs afterwards; never at the end of the run itself,
and not inside another run unless the last collection is BUSY seconds old. Checked with weak references to
cycles, which only a full collection frees."""
from __future__ import annotations

import gc
import time
import weakref

import pytest

from viz_explorer.server import memory


class Node:
    def __init__(self):
        self.me = self                      # a cycle: reference counting alone never frees it


def cycle_garbage() -> weakref.ref:
    return weakref.ref(Node())


@pytest.fixture
def quick(monkeypatch):
    with memory._timer_lock:                                  # an earlier test's app runs left a collection
        if memory._pending is not None:                       # scheduled: it must not count as this test's
            memory._pending.cancel()
            memory._pending = None
    with memory._lock:                                        # nor one under way
        pass
    monkeypatch.setattr(memory, "MIN_INTERVAL", 0.3)
    monkeypatch.setattr(memory, "QUIET", 0.1)
    monkeypatch.setattr(memory, "BUSY", 3.0)                  # far past the waiting test's run, on a loaded machine too
    monkeypatch.setitem(memory._state, "last", 0.0)
    gc.disable()                                              # only the module's collections count
    yield
    gc.enable()


def collected_within(refs, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(r() is not None for r in refs) and time.monotonic() < deadline:
        time.sleep(0.02)
    return all(r() is None for r in refs)


def test_a_run_is_collected_soon_after_it_ends_not_at_its_end(quick):
    """The collection holds the interpreter lock: made at the run's end, the visitor would wait for it."""
    with memory.page_run():
        ref = cycle_garbage()
    assert ref() is not None                                  # the run ended without collecting
    assert collected_within([ref], 10)                        # a loaded machine delays the timer


def test_a_due_collection_waits_for_the_run_under_way(quick):
    memory.collect()                                          # starts the interval: not yet BUSY
    with memory.page_run():
        ref = cycle_garbage()
    with memory.page_run():                                   # another visitor's run, begun before it is due
        time.sleep(memory.QUIET * 5)
        assert ref() is not None                              # put off: it would stall this run
    assert collected_within([ref], 10)                        # made once the run ended


def test_a_server_never_quiet_still_collects(quick):
    """Runs that overlap without end (a class) do not put collections off past BUSY."""
    memory.collect()
    with memory.page_run():
        ref = cycle_garbage()
        memory.after_run()
        assert collected_within([ref], memory.BUSY + 10)      # inside the run, once BUSY is up


def test_a_busy_server_does_not_put_a_collection_off(quick):
    """Two runs under way: one of them is stalled whatever is done, so the collection is made when due."""
    memory.collect()
    with memory.page_run():
        with memory.page_run():
            ref = cycle_garbage()
            memory.after_run()
            assert collected_within([ref], memory.BUSY - 0.5)         # well before BUSY is up


def test_a_run_within_the_interval_is_collected_when_it_is_up(quick):
    memory.collect()                                          # starts the interval
    ref = cycle_garbage()
    memory.after_run()                                        # too soon: scheduled, not now
    assert ref() is not None
    deadline = time.monotonic() + 5
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ref() is None                                      # nothing else ran: the timer collected it


def test_many_runs_in_the_interval_make_one_collection(quick):
    memory.collect()
    before = memory.stats()["collections"]
    refs = []
    for _ in range(5):
        refs.append(cycle_garbage())
        memory.after_run()
    deadline = time.monotonic() + memory.MIN_INTERVAL + 10                   # a loaded machine delays the timer
    while any(r() is not None for r in refs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(r() is None for r in refs)
    time.sleep(0.2)                                                         # nothing else is scheduled after it
    assert memory.stats()["collections"] == before + 1


def test_a_collection_asked_for_while_another_runs_is_made_later(quick):
    """A collection that starts before some garbage exists does not cover it: a run that ends while one is
    under way gets one of its own afterwards, not none."""
    memory.collect()                                          # starts the interval
    time.sleep(memory.MIN_INTERVAL + 0.05)
    with memory._lock:                                        # another thread is collecting
        ref = cycle_garbage()
        memory.collect()                                      # due now, but the collector is busy
    deadline = time.monotonic() + memory.MIN_INTERVAL + 10
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ref() is None


def test_a_collection_after_a_run_freezes_nothing(quick):
    """Only the start-up load freezes (viz_explorer/startup/load.py): a visitor's objects alive at a page run's
    collection stay in the collector's reach, so their cycles are freed when the session ends."""
    frozen = gc.get_freeze_count()

    class Visitor:
        pass
    a, b = Visitor(), Visitor()
    a.other, b.other = b, a                                     # a session's cycle, alive during the collection
    memory.collect()
    assert gc.get_freeze_count() == frozen
    import weakref
    gone = weakref.ref(a)
    del a, b
    memory.collect()
    assert gone() is None                                       # collected with the next one
