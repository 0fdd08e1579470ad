"""map_in_threads: the results of a plain loop, in order, with work really on several threads at once."""
import threading
import time

import pytest

from viz_transformer.run.in_threads import map_in_threads


def test_results_come_in_the_items_order_whatever_finishes_first():
    def slow_first(x):
        time.sleep(0.05 if x == 0 else 0.0)
        return x * x
    assert list(map_in_threads(slow_first, range(7), workers=3)) == [x * x for x in range(7)]


def test_that_many_items_run_at_once_and_no_more():
    now, most, lock = [0], [0], threading.Lock()

    def work(x):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.03)
        with lock:
            now[0] -= 1
        return x
    assert list(map_in_threads(work, list(range(8)), workers=3)) == list(range(8))
    assert most[0] == 3


def test_an_error_surfaces_at_its_item_and_a_bad_count_is_refused():
    def fails_at_two(x):
        if x == 2:
            raise ValueError("item two")
        return x
    got = map_in_threads(fails_at_two, [0, 1, 2, 3], workers=2)
    assert [next(got), next(got)] == [0, 1]
    with pytest.raises(ValueError, match="item two"):
        next(got)
    with pytest.raises(ValueError, match="1 or more"):
        list(map_in_threads(str, [1], workers=0))
