"""CPU seconds by kind of process while a command runs: where a browser test's time goes (Chromium's renderer, its
other processes, the Streamlit server, pytest itself), read from /proc every --interval seconds. `time` cannot say:
Chromium's processes are not all reaped by the command, so their CPU is missing from its user + sys.

    python -m benchmarks.cpu_by_process -- python -m pytest -n 0 -q -p no:cacheprovider tests/test_browser_legibility.py

Every process seen while the command runs is counted from its first sighting to its last (a process that starts and
ends between two readings is missed: keep --interval small against the processes that matter). Processes that were
running before the command started count only what they used during it, so a machine's other work shows as its
own kinds: measure on an idle machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter

TICK = os.sysconf("SC_CLK_TCK")


def kind(cmdline: str) -> str:
    """The kind of a process from its command line: "chromium <type>" (renderer, gpu-process, utility; "main" for
    the browser process), "streamlit", "pytest", "node" (Playwright's driver), else its program's name. Only the
    program and its first two arguments are read (`python -m pytest`), not its data (a path may say pytest)."""
    words = cmdline.split()
    if not words:
        return "(kernel)"
    if "chrom" in os.path.basename(words[0]):
        return "chromium " + next((w.split("=", 1)[1] for w in words if w.startswith("--type=")), "main")
    head = " ".join(words[:3])
    return next((name for name in ("streamlit", "pytest", "node") if name in head), os.path.basename(words[0]))


def read_all(me: int) -> dict[int, tuple[str, float]]:
    """pid -> (kind, CPU seconds so far: user + system) of every process /proc lists but `me`."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:                              # ended between the listing and the read
            continue
        out[int(entry)] = (kind(cmd), (int(fields[11]) + int(fields[12])) / TICK)
    return out


def measure(command: list[str], interval: float = 0.5) -> tuple[float, Counter, int]:
    """Run `command`; (its wall seconds, CPU seconds by kind over every process seen meanwhile, its exit status)."""
    me = os.getpid()
    first = read_all(me)
    last = dict(first)
    t0 = time.perf_counter()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        time.sleep(interval)
        for pid, (k, cpu) in read_all(me).items():
            first.setdefault(pid, (k, 0.0))          # started after the command: all of its CPU counts
            if k == "(kernel)" and pid in last:      # an ended process, not yet reaped, has no command line
                k = last[pid][0]
            last[pid] = (k, cpu)
    wall = time.perf_counter() - t0
    used = Counter()
    for pid, (k, cpu) in last.items():
        used[k] += cpu - first[pid][1]
    return wall, used, proc.returncode


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--interval", type=float, default=0.5, help="seconds between two readings of /proc")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    a = p.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("give the command after --")
    wall, used, status = measure(command, a.interval)
    total = sum(used.values())
    print(f"\n{wall:.1f} s wall, {total:.1f} CPU s ({total / wall:.2f} cores busy on average, {os.cpu_count()} here)")
    for k, s in used.most_common():
        if s >= 0.05:
            print(f"{s:9.1f} s  {100 * s / total:5.1f} %  {k}")
    return status                                    # the command's own: a failing suite still fails


if __name__ == "__main__":
    sys.exit(main())
