"""A benchmark's measurements over time: benchmarks/results/history/NAME.json holds a list of entries, each with
benchmark, commit, date, machine, command and numbers (and the session that took it, where one did).

    python -m benchmarks.history                 # the benchmarks that have a history
    python -m benchmarks.history cold_start      # its entries, oldest first: date, commit, machine, command, numbers

A benchmark adds an entry with `record(...)`; docs/benchmarks.md quotes only the latest one.
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HISTORY = ROOT / "benchmarks" / "results" / "history"
FIELDS = ("benchmark", "commit", "date", "machine", "command", "numbers")


def names(folder: Path = HISTORY) -> list[str]:
    """Every benchmark with a history file, sorted."""
    return sorted(p.stem for p in Path(folder).glob("*.json"))


def entries(name: str, folder: Path = HISTORY) -> list[dict]:
    """NAME's entries, oldest first: by date, entries of one date (or none) in the file's order."""
    path = Path(folder) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"no history for {name!r} in {folder} (known: {', '.join(names(folder)) or 'none'})")
    rows = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(rows, list):
        raise ValueError(f"{path}: a list of entries expected, got {type(rows).__name__}")
    missing = [(i, f) for i, row in enumerate(rows) for f in FIELDS if f not in row]
    if missing:
        raise ValueError(f"{path}: entry {missing[0][0]} lacks {missing[0][1]!r}")
    # sorted() is stable: undated entries and entries of one day keep the order they were written in
    return sorted(rows, key=lambda r: r["date"] or "")


def trend(name: str, folder: Path = HISTORY, width: int = 110) -> str:
    """NAME's entries as text, one block an entry, oldest first."""
    rows = entries(name, folder)
    out = [f"{name}: {len(rows)} entries, oldest first"]
    for row in rows:
        session = f"session {row['session']}" if row.get("session") else ""
        when = " ".join(x for x in (row["date"] or "undated", row["commit"] or "", session) if x)
        out.append(f"\n{when}  ({row['machine'] or 'machine not given'})")
        if row["command"]:
            out.append(f"  $ {row['command']}")
        out.extend(textwrap.wrap(row["numbers"], width, initial_indent="  ", subsequent_indent="  "))
    return "\n".join(out)


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def record(benchmark: str, command: str, numbers: str, machine: str, folder: Path = HISTORY, **extra) -> dict:
    """Append one measurement to benchmarks/results/history/BENCHMARK.json (today's date, HEAD's commit, with
    "+changes" when the working tree differs from it) and return the entry."""
    commit = _git("rev-parse", "--short", "HEAD")
    if commit and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    row = {"benchmark": benchmark, "commit": commit, "date": datetime.date.today().isoformat(), "machine": machine,
           "command": command, "numbers": numbers, **extra}
    path = Path(folder) / f"{benchmark}.json"
    rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows + [row], indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", nargs="?", help="a benchmark (no name: list those with a history)")
    p.add_argument("--folder", type=Path, default=HISTORY, help="the history files (default: %(default)s)")
    a = p.parse_args(argv)
    if a.name is None:
        for n in names(a.folder):
            k = len(entries(n, a.folder))
            print(f"{n:20} {k:3} {'entry' if k == 1 else 'entries'}")
        return 0
    try:
        print(trend(a.name, a.folder))
    except FileNotFoundError as e:
        print(e)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
