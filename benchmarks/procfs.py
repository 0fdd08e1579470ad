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


ARENA_ALIGN = 64 << 20        # glibc's HEAP_MAX_SIZE on 64-bit: a thread arena's heap starts at a multiple of it


def _smaps(pid):
    """(mapping's name or "", its permissions, its start address, field, kB) for every size field of every mapping
    in /proc/PID/smaps."""
    name, perms, start = "", "", 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):      # a mapping's header line
                start, perms, name = int(head[0].split("-")[0], 16), head[1], head[5] if len(head) > 5 else ""
            elif len(head) == 3 and head[2] == "kB":
                yield name, perms, start, head[0], int(head[1])


def anon_regions_mib(pid="self") -> dict:
    """Resident anonymous memory of process `pid` by region, MiB (from /proc/PID/smaps; they add up to RssAnon):
    `main_arena` (glibc's [heap]), `thread_arenas` (glibc's other arenas: writable mappings without a file starting at
    a multiple of 64 MiB), `other` (Python's object arenas, blocks malloc mapped on their own, thread stacks, anything
    else without a file), `in_files` (pages of mapped files written to: shared libraries' data and relocations)."""
    out = {"main_arena": 0.0, "thread_arenas": 0.0, "other": 0.0, "in_files": 0.0}
    for name, perms, start, field, kb in _smaps(pid):
        if field != "Anonymous:":
            continue
        if name == "[heap]":
            region = "main_arena"
        elif name.startswith("/"):
            region = "in_files"
        elif not name and "w" in perms and start % ARENA_ALIGN == 0:
            region = "thread_arenas"
        else:
            region = "other"
        out[region] += kb / 1024
    return out


def mapped_files_mib(pid="self", suffix: str = ".safetensors") -> float:
    """Resident pages of the files process `pid` maps whose name ends with `suffix`, MiB (weights a loader left in
    their file's pages, zero-copy, rather than in the heap)."""
    return sum(kb for name, _, _, field, kb in _smaps(pid) if field == "Rss:" and name.endswith(suffix)) / 1024


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
