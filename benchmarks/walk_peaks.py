"""benchmarks/bench_pages_hf's walk with the server's peak RSS per action: its VmHWM is reset (/proc/PID/clear_refs
5) before the new text and before each page, and read after, so a peak is placed (the goal: ≤ 6 GB).

    python -m benchmarks.walk_peaks --tokens 2048 --pause-training --app /tmp/before     # bench_pages_hf's arguments

Prints a line per action (its peak and the RSS after it), then bench_pages_hf's table; the final "peak" there is the
last action's, since each action resets it.
"""
from __future__ import annotations

import sys

import benchmarks.bench_pages_hf as pages


def memory(pid: int) -> dict:
    """{"VmHWM": MiB, "VmRSS": MiB} of a process."""
    with open(f"/proc/{pid}/status") as f:
        return {line.split(":")[0]: int(line.split()[1]) // 1024 for line in f if line.startswith(("VmHWM", "VmRSS"))}


def main(argv=None) -> int:
    server_pid: list[int] = []
    measure, server = pages.measure_action, pages.Server

    class Server(server):
        def __enter__(self):
            out = super().__enter__()
            server_pid.append(self.proc.pid)
            return out

    def measured(page, traffic, action, arg, **kw):
        pid = server_pid[-1]
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")                                # VmHWM := VmRSS now
        r = measure(page, traffic, action, arg, **kw)
        m = memory(pid)
        what = "new text" if action == "submit" else arg.rsplit("/", 1)[-1].strip("\"']")
        print(f"  peak {m['VmHWM']} MiB, RSS after {m['VmRSS']} MiB: {what}", flush=True)
        return r

    pages.Server, pages.measure_action = Server, measured
    try:
        return pages.main(argv)
    finally:
        pages.Server, pages.measure_action = server, measure


if __name__ == "__main__":
    sys.exit(main())
