"""docs/where-things-live.md lists every module of viz_transformer/ and viz_explorer/ (pages included), one line each,
under a '### folder/' heading; a module added without a line, or a line left for a module that is gone, fails here."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "where-things-live.md"
PACKAGES = ("viz_transformer", "viz_explorer")
FOLDER = re.compile(r"^### ((?:viz_transformer|viz_explorer)/(?:[\w]+/)*)\s*$")
ITEM = re.compile(r"^- `([\w/]+\.py)`: (\S.*)$")


def listed() -> dict[str, str]:
    """Each module the map names (its path from the repository root) -> its line's text."""
    out, folder = {}, None
    for line in MAP.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            m = FOLDER.match(line)
            folder = m.group(1) if m else None
        elif folder and (m := ITEM.match(line)):
            path = folder + m.group(1)
            assert path not in out, f"{path} is listed twice"
            out[path] = m.group(2)
    return out


def modules() -> set[str]:
    """Every module of the two packages; a package's __init__.py may be listed but need not be."""
    return {p.relative_to(ROOT).as_posix() for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
            if "__pycache__" not in p.parts}


def test_every_module_is_in_the_map():
    missing = sorted(m for m in modules() - set(listed()) if not m.endswith("/__init__.py"))
    assert not missing, f"docs/where-things-live.md has no line for {missing}"


def test_the_map_names_no_module_that_is_gone():
    gone = sorted(set(listed()) - modules())
    assert not gone, f"docs/where-things-live.md lists modules that do not exist: {gone}"


def test_every_page_script_is_in_the_map():
    # the pages are modules too; checked on their own so that the parser cannot skip their folders unnoticed
    pages = {m for m in modules() if m.startswith("viz_explorer/pages/") and not m.endswith("__init__.py")}
    assert pages and pages <= set(listed())


def test_each_line_says_a_job():
    short = [path for path, job in listed().items() if len(job.split()) < 3]
    assert not short, f"say what these do: {short}"
