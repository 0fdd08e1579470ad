"""What Linux's /proc says about a process, for the benchmarks."""
from __future__ import annotations


def rss_mib(pid="self") -> float:
    """Resident memory of process `pid` (default: this one) in MiB; NaN where /proc has no VmRSS."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
