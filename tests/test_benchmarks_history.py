"""docs/benchmarks.md is a reference that follows benchmarks/: every runnable benchmark has a section there and every
section names a module that exists; a number's history is in benchmarks/results/history/, and
`python -m benchmarks.history NAME` prints it oldest first."""
import json
import re
from pathlib import Path

from benchmarks import history

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
SECTION = re.compile(r"^### `(\w+)`", re.M)
NOT_BENCHMARKS = {"history"}  # reads the results; measures nothing


def runnable() -> set[str]:
    """The modules of benchmarks/ that run as `python -m benchmarks.NAME` (helpers such as stclient have no main)."""
    return {p.stem for p in (ROOT / "benchmarks").glob("*.py")
            if 'if __name__ == "__main__"' in p.read_text(encoding="utf-8")} - NOT_BENCHMARKS


def test_every_runnable_benchmark_has_a_section():
    missing = runnable() - set(SECTION.findall(PAGE))
    assert not missing, f"docs/benchmarks.md has no '### `NAME`' section for {sorted(missing)}"


def test_every_section_names_a_benchmark_that_exists():
    gone = set(SECTION.findall(PAGE)) - runnable()
    assert not gone, f"docs/benchmarks.md has sections for modules not in benchmarks/: {sorted(gone)}"


def test_the_page_is_a_reference_not_a_diary():
    assert len(PAGE.splitlines()) <= 300
    assert not re.search(r"(?im)^#+ .*\bsession \d+", PAGE), "a heading names a session"
    named = set(re.findall(r"\btests/(test_\w+\.py)", PAGE))
    assert named and not {n for n in named if not (ROOT / "tests" / n).exists()}, "names a test file that is gone"


def test_the_history_command_prints_a_files_entries_oldest_first(tmp_path, capsys):
    rows = [  # written out of order: the command orders them by date, same-day entries as written
        {"benchmark": "demo", "commit": "bbb2222", "date": "2026-11-27", "machine": "2 cores", "command": "cmd b",
         "numbers": "second 2.0 s"},
        {"benchmark": "demo", "commit": "aaa1111", "date": "2026-11-25", "machine": "2 cores, idle", "command": "cmd a",
         "numbers": "first 3.0 s", "session": 14},
        {"benchmark": "demo", "commit": None, "date": "2026-11-27", "machine": "2 cores", "command": "cmd c",
         "numbers": "third 1.0 s"},
    ]
    (tmp_path / "demo.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "other.json").write_text("[]", encoding="utf-8")

    assert history.main(["demo", "--folder", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    where = [out.index(s) for s in ("first 3.0 s", "second 2.0 s", "third 1.0 s")]
    assert where == sorted(where), out
    assert "2026-11-25 aaa1111 session 14" in out and "$ cmd a" in out and "2 cores, idle" in out

    assert history.main(["--folder", str(tmp_path)]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[0] == "demo" and "other" in listed

    assert history.main(["missing", "--folder", str(tmp_path)]) == 2


def test_record_appends_an_entry_with_every_field(tmp_path):
    history.record("demo", "python -m benchmarks.demo", "1.0 s", "2 cores", folder=tmp_path)
    row = history.record("demo", "python -m benchmarks.demo", "0.9 s", "2 cores", folder=tmp_path)
    assert [r["numbers"] for r in history.entries("demo", tmp_path)] == ["1.0 s", "0.9 s"]
    assert set(history.FIELDS) <= set(row) and re.fullmatch(r"\d{4}-\d\d-\d\d", row["date"])


def test_every_stored_history_has_the_fields_and_names_itself():
    names = history.names()
    assert "cold_start" in names and "bench_warning" in names
    for name in names:
        rows = history.entries(name)  # raises on a missing field
        assert rows and {r["benchmark"] for r in rows} == {name}, name
