"""What Linux's /proc says about a process, for the benchmarks."""
from __future__ import annotations


def rss_mib(pid="self") -> float:
    """Resident memory of process `pid` (default: this one) in MiB; NaN where /proc has no VmRSS."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_parts_mib(pid="self") -> dict:
    """Resident memory of process `pid` by kind, MiB: anon (the heap, Python's objects, tensors) and file (mapped
    files: shared libraries' code and mapped weight files, which the kernel can drop and read again)."""
    want = {"RssAnon:": "anon", "RssFile:": "file"}
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(maxsplit=1)[0] if line.strip() else ""
            if key in want:
                out[want[key]] = int(line.split()[1]) / 1024
    return out


def cpu_seconds(pid="self") -> float:
    """User + system CPU seconds process `pid` has used so far."""
    import os
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(root: int, name: bytes = b"") -> list[int]:
    """Every process under `root` whose command line contains `name` (deploy/serve.sh's app processes)."""
    from pathlib import Path
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass

    def under(pid):
        while pid in parent and pid != root:
            pid = parent[pid]
        return pid == root
    out = []
    for p in parent:
        try:
            if p != root and under(p) and name in Path(f"/proc/{p}/cmdline").read_bytes():
                out.append(p)
        except OSError:
            pass
    return out
