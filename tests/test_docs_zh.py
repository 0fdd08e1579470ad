"""One Chinese documentation tree (issue 57.7): docs/zh-CN/ mirrors docs/ file for file. Each Chinese page has the
English page's headings (the same levels, in the same order), its code blocks (the same count, the same command
lines, the same code once comments are set aside: comments may be translated), its tables (the same count and rows,
every number of the English tables also in the Chinese ones), and links that resolve, anchors included; it links
the Chinese sibling of a page wherever one exists, and so does README.zh-CN."""
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ZH = DOCS / "zh-CN"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMAND = re.compile(r"^(python|pip|streamlit|viz-transformer)\b")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def parse(path: Path) -> dict:
    """Headings (level), code blocks (lines) and tables (rows) of one page; nothing inside a code block is a heading
    or a table."""
    heads, blocks, tables, block, last_table_row = [], [], [], None, -2
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if line.startswith("```"):
            if block is None:
                block = []
            else:
                blocks.append(block)
                block = None
        elif block is not None:
            block.append(line)
        elif m := re.match(r"(#{1,6}) \S", line):
            heads.append(len(m.group(1)))
        elif line.startswith("|"):
            if last_table_row != i - 1:
                tables.append([])
            tables[-1].append(line)
            last_table_row = i
    assert block is None, f"{path.name}: a code block is never closed"
    return {"heads": heads, "blocks": blocks, "tables": tables}


def without_comments(block: list[str]) -> list[str]:
    """The code of a block, each `# comment` (a # at the start or after a space) set aside, blank lines dropped."""
    out = [re.sub(r"(^|\s)#(\s.*)?$", "", line).rstrip() for line in block]
    return [line for line in out if line]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation (Chinese punctuation too) dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen, out, fenced = Counter(), set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            s = slug(m.group(1))
            out.add(s if not seen[s] else f"{s}-{seen[s]}")
            seen[s] += 1
    return out


def test_every_english_page_has_its_chinese_page_and_no_other():
    zh = sorted(p.name for p in ZH.glob("*.md"))
    assert zh == PAGES, (sorted(set(PAGES) - set(zh)), sorted(set(zh) - set(PAGES)))
    assert not (DOCS / "zh-CN.md").exists(), "the old second Chinese tree is back"


@pytest.mark.parametrize("name", PAGES)
def test_the_headings_match_in_level_and_order(name):
    en, zh = parse(DOCS / name)["heads"], parse(ZH / name)["heads"]
    assert en == zh and en, (en, zh)


@pytest.mark.parametrize("name", PAGES)
def test_the_code_blocks_match(name):
    en, zh = parse(DOCS / name)["blocks"], parse(ZH / name)["blocks"]
    assert len(en) == len(zh), (len(en), len(zh))
    for i, (e, z) in enumerate(zip(en, zh)):
        commands = [[without_comments([line]) for line in b if COMMAND.match(line)] for b in (e, z)]
        assert commands[0] == commands[1], f"block {i}: the command lines differ"
        assert without_comments(e) == without_comments(z), f"block {i}: the code differs"


@pytest.mark.parametrize("name", PAGES)
def test_the_tables_match_row_for_row_and_number_for_number(name):
    en, zh = parse(DOCS / name)["tables"], parse(ZH / name)["tables"]
    assert [len(t) for t in en] == [len(t) for t in zh], "the tables or their rows differ"
    for i, (e, z) in enumerate(zip(en, zh)):
        missing = Counter(NUMBER.findall("\n".join(e))) - Counter(NUMBER.findall("\n".join(z)))
        assert not missing, f"table {i}: numbers of the English table missing from the Chinese one: {dict(missing)}"


@pytest.mark.parametrize("name", PAGES)
def test_the_links_resolve_and_prefer_the_chinese_sibling(name):
    page, bad = ZH / name, []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{target}: no such file")
        elif file.parent == DOCS and (ZH / file.name).exists():
            bad.append(f"{target}: the Chinese page zh-CN/{file.name} exists")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            bad.append(f"{target}: no such heading")
    assert not bad, bad


def test_the_chinese_readme_links_the_chinese_pages():
    bad = []
    for target in LINK.findall((ROOT / "README.zh-CN.md").read_text(encoding="utf-8")):
        path, _, anchor = target.partition("#")
        if m := re.fullmatch(r"docs/([\w.-]+\.md)", path):
            if (ZH / m.group(1)).exists():
                bad.append(f"{target}: docs/zh-CN/{m.group(1)} exists")
        elif m := re.fullmatch(r"docs/zh-CN/([\w.-]+\.md)", path):
            if not (ZH / m.group(1)).exists():
                bad.append(f"{target}: no such file")
            elif anchor and anchor not in anchors(ZH / m.group(1)):
                bad.append(f"{target}: no such heading")
    assert not bad, bad


def test_the_english_readme_and_pages_link_no_chinese_page():
    """The English side links the Chinese tree once (README.md's table), never a Chinese page in place of its own."""
    for md in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        links = [t for t in LINK.findall(md.read_text(encoding="utf-8")) if "zh-CN/" in t]
        assert links == (["docs/zh-CN/"] if md.name == "README.md" else []), (md.name, links)
