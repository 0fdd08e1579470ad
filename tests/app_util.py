"""What the app tests share: open the app on a page with AppTest, and read what a page shows
(figures' data as numpy, titles, messages, widgets by key)."""
from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from viz_explorer.kit import static_table

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
ZH = "我是一名工程师。"
PAGES = ["viz_explorer/pages/look/overview.py", "viz_explorer/pages/look/attention.py", "viz_explorer/pages/step/step_by_step.py",
         "viz_explorer/pages/look/masks.py", "viz_explorer/pages/look/positional_encoding.py", "viz_explorer/pages/step/decoding.py"]


def page_file(name: str) -> str:
    """A page's script from its name in the navigation (viz_explorer/kit/registry.py): "masks" -> viz_explorer/pages/look/masks.py."""
    from viz_explorer.kit.registry import PAGES as SPECS, page_path
    return next(page_path(p) for p in SPECS if p.name == name)


def open_app(page: str = "viz_explorer/pages/look/overview.py", ckpt: str = "tiny-zh-en", text=ZH, lang: str | None = None,
             timeout: int = 60) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    if lang is not None:
        at.query_params["lang"] = lang
    if ckpt is not None:
        at.session_state["ckpt"] = ckpt
    if text is not None:
        at.session_state["text"] = text
    first_page(at, page)
    at.run(timeout=timeout)
    assert not at.exception, [e.value for e in at.exception]
    assert at._finished_page_script_hash == at._page_hash, f"the first run did not open {page}"
    return at


def first_page(at: AppTest, page: str) -> None:
    """Make `page` (its script, relative to the checkout or absolute) the first run's page, as a shared link opens it,
    without a run of the Overview before it. AppTest.switch_page cannot before the first run: it names a page by its
    file's stem, st.navigation by its url_path (viz_explorer/kit/registry.py: positional_encoding.py is
    "positional"), so this sets the hash that switch_page sets, computed as st.Page computes it (Streamlit 1.67,
    pinned; open_app checks that the run opened it)."""
    from streamlit.util import calc_hash

    from viz_explorer.kit.registry import DEFAULT, PAGES as SPECS, page_path
    spec = next((s for s in SPECS if Path(page_path(s)).resolve() == (ROOT / page).resolve()), None)
    assert spec is not None, f"{page} is no page of viz_explorer/kit/registry.py"
    at._page_hash = calc_hash("" if spec.name == DEFAULT else spec.name)


def array(v):
    """Plotly JSON array (a list, or a typed array {"dtype", "bdata", "shape"}) -> numpy."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return a.reshape([int(s) for s in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.asarray(v, dtype=float)


def figures(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def figure(at, title_part: str) -> dict:
    found = [f for f in figures(at) if title_part in f["layout"]["title"]["text"].replace("<br>", " ")]   # wrapped
    assert found, f"no figure titled *{title_part}*: {[f['layout']['title']['text'] for f in figures(at)]}"
    return found[0]


def texts(at) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success", "code", "text")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def md_unescape(s: str) -> str:
    """What Markdown shows of s (CommonMark: a backslash before ASCII punctuation shows that character)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", s)


class _TableReader(HTMLParser):
    """The header and the cells' text of a static_table block, as a browser shows them (entities decoded), read by
    their ARIA roles, and every tag it holds."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.head, self.rows, self.tags, self._cell, self._open = [], [], set(), None, []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        role = dict(attrs).get("role")
        self._open.append(role)
        if role == "row":
            self.rows.append([])
        elif role in ("columnheader", "cell"):
            self._cell = []

    def handle_endtag(self, tag):
        role = self._open.pop() if self._open else None
        if role in ("columnheader", "cell") and self._cell is not None:
            (self.head if role == "columnheader" else self.rows[-1]).append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def read_table(body: str) -> tuple[pd.DataFrame, set]:
    """A static_table block's HTML as a DataFrame of the text each cell shows, and the set of its tags."""
    r = _TableReader()
    r.feed(body)
    return pd.DataFrame([row for row in r.rows if row], columns=r.head), r.tags


def table_bodies(at) -> list[str]:
    """The HTML of every table page_parts.table drew (static_table), in page order."""
    return [e.proto.body for e in at.get("html") if f'class="{static_table.CLASS}"' in e.proto.body]


def tables(at) -> list[pd.DataFrame]:
    """Every table page_parts.table drew, in page order, each cell the text the reader sees."""
    return [read_table(body)[0] for body in table_bodies(at)]


def by_key(widgets, key):
    return next(w for w in widgets if w.key == key)



def open_tab(at, prefix: str, name: str) -> AppTest:
    """Open a tab of a page with lazy tabs (viz_explorer.kit.widgets.lazy_tabs) and rerun."""
    from viz_explorer.kit.strings import LANG_KEY, speaking
    from viz_explorer.kit.widgets import tab_label
    with speaking(at.session_state[LANG_KEY] if LANG_KEY in at.session_state else "en"):     # the page's language
        at.session_state[f"{prefix}_tab"] = tab_label(prefix, name)
    at.run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    return at


def finish_corpus_jobs(at: AppTest, timeout: float = 300) -> AppTest:
    """Wait until every corpus job the page started (viz_explorer/server/corpus_jobs.py: a thread of its own) has
    ended, then rerun the page: what a browser sees when the progress fragment notices the end."""
    import time
    from viz_explorer.server import corpus_jobs
    end = time.monotonic() + timeout
    while corpus_jobs.running() and time.monotonic() < end:
        time.sleep(0.05)
    assert not corpus_jobs.running(), "a corpus job is still running"
    at.run(timeout=120)
    return at
