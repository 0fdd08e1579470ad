"""Hostile input on every page of the app (the list is read from app.py, so pages added later are
covered): every hostile text, absurd values pushed into every widget's session state, and hostile
query parameters. Each gives a message or a result, never an exception, and the text is never HTML."""
from __future__ import annotations

import math
import re

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, ROOT, figures, open_app, read_table, table_bodies, tables, texts
from hostile import HOSTILE, INJECT, REFUSED

pytestmark = pytest.mark.slow          # every page × every hostile value

WIDGETS = ("button", "checkbox", "color_picker", "date_input", "multiselect", "number_input", "radio",
           "select_slider", "selectbox", "slider", "text_area", "text_input", "time_input", "toggle")


def app_pages() -> list[str]:
    """The page scripts app.py lists in st.navigation: viz_explorer/kit/registry.py's (no streamlit import)."""
    from viz_explorer.kit.registry import PAGES as SPECS, page_path
    pages = [str(page_path(p)) for p in SPECS]
    assert pages and all((ROOT / p).is_file() for p in pages), pages
    return pages


PAGES = app_pages()
REFUSED_HERE = {k: v for k, v in REFUSED.items() if k != "surrogates"}   # viz_explorer/kit/session_guard.py makes them U+FFFD


def raw_html(at) -> list[str]:
    """Markdown-ish elements whose source holds an unescaped tag a browser would parse."""
    shown = [(kind, str(e.value)) for kind in ("markdown", "caption", "info", "warning", "error", "success")
             for e in getattr(at, kind)]
    found = [f"{kind}: {v}" for kind, v in shown if re.search(r"(?<!\\)<\s*(script|img|iframe|svg)", v, re.I)]
    for body in table_bodies(at):                           # a static table's HTML holds the table's own tags only
        found += [f"table: <{tag}>" for tag in read_table(body)[1] - {"style", "div"}]
    return found


# pages that do not read the sidebar's text: an unusable text is not refused there
TEXT_FREE = tuple(str(ROOT / p) for p in ("viz_explorer/pages/look/positional_encoding.py",
                                          "viz_explorer/pages/class/live_class.py",    # as registry.page_path
                                          "viz_explorer/pages/class/lessons.py"))      # the shelf reads no text


def visit_every_page(at, what) -> None:
    for page in PAGES:
        at.switch_page(page)
        at.run(timeout=120)
        assert not at.exception, (what, page, [e.value for e in at.exception])
        assert not raw_html(at), (what, page, raw_html(at))
        for f in figures(at):
            assert "<script" not in str(f) and "<img" not in str(f), (what, page)
        yield page


@pytest.mark.parametrize("ckpt,names", [("tiny-zh-en", list(HOSTILE)),
                                        ("tiny-lm", ["html", "emoji", "word5k", "nul", "100k", "empty"])])
def test_every_hostile_text_on_every_page(env, ckpt, names, monkeypatch, tmp_path):
    from viz_explorer.server import db
    monkeypatch.setenv("VIZ_DATA", str(tmp_path))
    db.dispose()
    for name in names:
        at = open_app(ckpt=ckpt, text=HOSTILE[name])
        for page in visit_every_page(at, name):
            shown = texts(at)
            if name in REFUSED_HERE and page not in TEXT_FREE:
                assert ("Type a sentence" in shown) if REFUSED[name] == "empty" else (REFUSED_HERE[name] in shown), \
                    (name, page, shown[:300])
                assert figures(at) == [], (name, page)
            elif name not in REFUSED_HERE and page != TEXT_FREE[1]:   # a result or a clear message, never an error
                assert not at.error and (figures(at) or at.dataframe or at.markdown or at.warning or at.info), \
                    (name, page, shown[:300])
    # no one asked for a link: the long texts stayed in the session, none in the database (the app makes none)
    assert stored_texts(tmp_path / "viz.sqlite3") == 0
    db.dispose()


def stored_texts(path) -> int:
    """Rows in the database's text tables (sqlite3 itself, not the module under test); 0 with no database."""
    import sqlite3
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        return sum(conn.execute(f"select count(*) from {t}").fetchone()[0] for t in ("texts", "shared_texts") if t in tables)


ABSURD = [-1, 10 ** 12, math.nan, math.inf, "", "<img src=x onerror=alert(1)>", None, [1, "x"], {"a": 1}, True]


@pytest.mark.parametrize("page", PAGES)
def test_absurd_values_in_every_widget_of_a_page(env, page):
    """Every keyed widget on the page and the sidebar gets each absurd value through session state
    (all at once, in a fresh session: the browser never sends such values, a script can)."""
    at = open_app(page)
    keys = sorted({w.key for kind in WIDGETS for w in at.get(kind) if w.key and not w.key.startswith("$$")})
    assert "text" in keys and "ckpt" in keys, keys
    for value in ABSURD:
        at = AppTest.from_file(APP, default_timeout=120)
        for key in keys:
            at.session_state[key] = value
        at.switch_page(page)
        for run in (1, 2):
            at.run(timeout=120)
            assert not at.exception, (page, value, run, [e.value for e in at.exception])
            assert not raw_html(at), (page, value)


def test_hostile_query_parameters(env):
    for params in ({"text": INJECT["script"]}, {"ckpt": "../../etc"}, {"page": "x" * 10_000},
                   {"embed": "true", "embed_options": "<script>"}, {INJECT["img"]: INJECT["img"]}):
        at = AppTest.from_file(APP, default_timeout=120)
        for k, v in params.items():
            at.query_params[k] = v
        at.run(timeout=120)
        assert not at.exception, (params, [e.value for e in at.exception])
        assert not raw_html(at)
        assert tables(at), params                              # the default text still runs
