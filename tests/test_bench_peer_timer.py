"""bench_peer's phones rerun their answer box as Streamlit's frontend does (setInterval: a fixed grid of ticks), not
one period after each run ends: after a slow run the next runs fall back on the grid, so phones slowed together do
not go on polling together."""
import asyncio

import pytest

from benchmarks.bench_peer import browser_timer


class Clock:
    """Virtual time: sleeping and running advance it, nothing waits."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def served(durations: list[float], every: float) -> list[float]:
    """The reference: requests sent at every, 2 * every, ... (the browser's interval) to a server that runs one at a
    time and answers every request waiting when it is free with one run; the start time of each run."""
    starts, free, answered = [], 0.0, 0          # answered: the ticks 1..answered have had their run
    for d in durations:
        start = max(free, (answered + 1) * every)
        starts.append(start)
        answered = int(start // every)           # every tick sent by the start is answered by this run
        free = start + d
    return starts


@pytest.mark.parametrize("durations", [
    [0.5, 2.5, 0.5, 0.5, 0.25],            # one run outlasts two ticks: one run at its end, then the grid
    [0.25] * 5,                            # quick runs: every tick
    [3.5, 0.5, 4.25, 0.5, 0.5, 0.5],      # slow runs in a row
])
def test_runs_start_where_a_browser_and_the_server_put_them(durations):
    clock, stop, starts = Clock(), asyncio.Event(), []

    async def run():
        starts.append(clock())
        clock.t += durations[len(starts) - 1]
        if len(starts) == len(durations):
            stop.set()
    asyncio.run(browser_timer(run, stop, origin=0.0, every=1.0, clock=clock, sleep=clock.sleep))
    assert starts == served(durations, 1.0)
    after = starts[durations.index(max(durations)) + 2:]       # past the slow run and the catch-up at its end
    assert all(s == int(s) for s in after)                     # back on the grid of ticks
