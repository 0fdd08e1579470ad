"""page_parts.table: one block of static HTML (static_table) whose cells read as typed, whatever characters they hold
(each is escaped: no user text becomes markup), at any length (no data grid, no Markdown per cell); True and False
show as ✓ and nothing. Read back with Python's own HTML parser, as a browser would decode it."""
from __future__ import annotations

import html
import re

import pytest
from streamlit.testing.v1 import AppTest

from app_util import read_table, tables
from viz_explorer.kit import static_table

HOSTILE = ["*bold*", "_x_", "<b>hi</b>", "[a](http://x)", "# h", "`c`", "$x$", "1. one", "- two", "a\\b", "|", "▁工程师",
           "</td></tr></table><script>alert(1)</script>", "&amp;", "\"quoted\" 'single'", "😀 emoji", ""]


def _app(rows: int):
    import streamlit as st

    from viz_explorer.kit import page_parts
    hostile = st.session_state["hostile"]
    pieces = (hostile * (rows // len(hostile) + 1))[:rows]
    page_parts.table({"piece <i>*</i>": pieces, "id": list(range(rows)), "starts": [i % 2 == 0 for i in range(rows)]})


@pytest.mark.parametrize("rows", [len(HOSTILE), 512])
def test_every_cell_shows_as_typed_at_any_length(rows):
    at = AppTest.from_function(_app, kwargs={"rows": rows})
    at.session_state["hostile"] = HOSTILE
    at.run(timeout=30)
    assert not at.exception and not at.table and not at.dataframe          # neither of Streamlit's own tables
    [df] = tables(at)
    assert list(df.columns) == ["piece <i>*</i>", "id", "starts"]
    assert list(df.iloc[:, 0]) == (HOSTILE * (rows // len(HOSTILE) + 1))[:rows]
    assert list(df.iloc[:, 1]) == [str(i) for i in range(rows)]
    assert list(df.iloc[:, 2]) == ["✓" if i % 2 == 0 else "" for i in range(rows)]


def test_no_cell_adds_a_tag():
    """The block's only tags are the table's own, whatever its cells hold."""
    body = static_table.markup({"<script>": HOSTILE, "n": [1.5] * len(HOSTILE)})
    _, tags = read_table(body)
    assert tags == {"style", "div"}
    assert "<script>" not in body and html.escape("<script>") in body


def test_a_column_of_numbers_is_right_aligned_and_others_are_not():
    body = static_table.markup({"a": ["x"], "b": [3], "c": [0.25], "d": [True], "e": [1, "x"]})
    assert body.count('role="cell" class="n"') == 2 and body.count('role="columnheader" class="n"') == 2
    assert '<div role="cell">x</div>' in body and '<div role="cell">✓</div>' in body


def test_columns_share_the_width_by_what_they_hold():
    """Header and rows read one set of widths (--vt-cols); a wide character counts double, a header its longest
    word."""
    body = static_table.markup({"piece": ["工程师"] * 3, "id": [1, 22, 333], "starts a word": [True] * 3})
    [cols] = re.findall(r"--vt-cols: ([^\"]+)\"", body)
    tracks = [(int(a), int(b)) for a, b in re.findall(r"minmax\((\d+)ch, (\d+)fr\)", cols)]
    assert [w for _, w in tracks] == [6 + 2, 4 + 2, 6 + 2]   # 工程师: 6 wide; "id" and "333": the least, 4; "starts a word": "starts"
    assert [m for m, _ in tracks] == [6 + 2, 3 + 2, 6 + 2]   # the longest word of each (工程师, 333, starts) + padding


def test_a_long_word_sets_its_columns_least_width_up_to_a_limit():
    body = static_table.markup({"state": ["无位置"], "output": ["engineer's " * 20 + "x" * 30]})
    [cols] = re.findall(r"--vt-cols: ([^\"]+)\"", body)
    assert [int(m) for m in re.findall(r"minmax\((\d+)ch", cols)] == [6 + 2, static_table.MIN_CH + 2]   # 3 wide characters; 30 x capped


def test_rows_come_in_blocks_the_browser_may_skip():
    body = static_table.markup({"a": list(range(2 * static_table.BLOCK + 1))})
    assert body.count("contain-intrinsic-size") == 3
    assert f"contain-intrinsic-size: auto {static_table.ROW_PX}px" in body           # the last block: one row


def test_the_rows_scroll_past_their_height():
    assert 'style="max-height: 300px"' in static_table.markup({"a": [1]}, height=300)
