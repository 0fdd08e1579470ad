"""page_parts.table: a short table is a static st.table whose cells read as typed (st.table renders its text cells
as Markdown, so each is escaped); a long one stays a data grid; True and False show as ✓ and nothing."""
from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from app_util import md_unescape
from viz_explorer.kit import page_parts

HOSTILE = ["*bold*", "_x_", "<b>hi</b>", "[a](http://x)", "# h", "`c`", "$x$", "1. one", "- two", "a\\b", "|", "▁工程师"]


def _app(rows: int):
    import streamlit as st

    from viz_explorer.kit import page_parts
    hostile = st.session_state["hostile"]
    pieces = (hostile * (rows // len(hostile) + 1))[:rows]
    page_parts.table({"piece *": pieces, "id": list(range(rows)), "starts": [i % 2 == 0 for i in range(rows)]})


def _run(rows: int) -> AppTest:
    at = AppTest.from_function(_app, kwargs={"rows": rows})
    at.session_state["hostile"] = HOSTILE
    return at.run(timeout=30)


def test_a_short_table_is_static_and_shows_each_cell_as_typed():
    at = _run(len(HOSTILE))
    assert not at.exception and len(at.table) == 1 and not at.dataframe
    df = at.table[0].value
    assert [md_unescape(c) for c in df.columns] == ["piece *", "id", "starts"]
    assert [md_unescape(v) for v in df.iloc[:, 0]] == HOSTILE
    for v in df.iloc[:, 0]:                      # no Markdown character left bare: each is escaped
        assert not re.search(r"(?<!\\)[*_<>\[\]#`$|]", v.replace("\\\\", "")), v
    assert list(df.iloc[:, 1]) == list(range(len(HOSTILE)))
    assert list(df.iloc[:, 2]) == ["✓" if i % 2 == 0 else "" for i in range(len(HOSTILE))]


def test_a_long_table_stays_a_data_grid_with_its_raw_values():
    rows = page_parts.STATIC_ROWS + 1
    at = _run(rows)
    assert not at.exception and len(at.dataframe) == 1 and not at.table
    df = at.dataframe[0].value
    assert len(df) == rows and df.iloc[0, 0] == HOSTILE[0] and bool(df.iloc[0, 2]) is True


def test_the_limit_itself_is_static():
    at = _run(page_parts.STATIC_ROWS)
    assert len(at.table) == 1 and len(at.table[0].value) == page_parts.STATIC_ROWS
