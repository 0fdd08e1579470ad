"""The README is a front door: at most 250 lines, a link to every docs/ page, and README.zh-CN with the
same sections in the same order (section by section, the same docs/ pages linked). Every relative link in the
READMEs and docs/ points at a file that exists."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def sections(text: str) -> list[tuple[str, set[str]]]:
    """(## heading, the docs/ pages linked under it), in order; headings inside code blocks do not count. A link to
    the Chinese page docs/zh-CN/x.md counts as the page x.md (tests/test_docs_zh.py checks that README.zh-CN links
    the Chinese page wherever there is one)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("## ") and not fenced:
            out.append((line[3:].strip(), set()))
        elif out:
            out[-1][1].update(re.findall(r"\]\(docs/(?:zh-CN/)?([\w.-]+\.md)", line))
    return out


def test_the_readme_is_at_most_250_lines():
    assert len(read("README.md").splitlines()) <= 250


def test_the_readme_links_every_docs_page():
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", read("README.md")))
    assert DOCS and not set(DOCS) - linked, sorted(set(DOCS) - linked)


def test_the_chinese_readme_mirrors_the_readme_section_by_section():
    en, zh = sections(read("README.md")), sections(read("README.zh-CN.md"))
    assert len(en) == len(zh) >= 5, ([h for h, _ in en], [h for h, _ in zh])
    for (en_head, en_links), (zh_head, zh_links) in zip(en, zh):
        assert en_links == zh_links, (en_head, zh_head)


def test_every_relative_link_points_at_a_file():
    missing = []
    for md in [ROOT / "README.md", ROOT / "README.zh-CN.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(md.read_text(encoding="utf-8")):
            path = target.split("#")[0]
            if path and not re.match(r"^[a-z]+:", path) and not (md.parent / path).exists():
                missing.append(f"{md.relative_to(ROOT)} -> {target}")
    assert not missing, missing
