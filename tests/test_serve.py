"""A fresh server, started with the README's `streamlit run app.py` or the class server's `streamlit run serve.py`:
both load torch and the default model in one thread from the process start, before the first visitor
(viz_explorer/startup/load.py). A visitor who comes while that thread works sees the loading note and then the
page, never an error; one who comes after it finds everything loaded."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from stclient import Server, Session

pytestmark = pytest.mark.browser           # a real server (tests/conftest.py marks these slow too)
LOADING = ("Loading the model", "正在加载模型")


def _overview(server: Server) -> tuple[list, list[str], list[str]]:
    """One session's first page: (exceptions, the headings' and the captions' texts)."""
    async def go():
        s = await Session.open(server.url)
        try:
            return await s.rerun(timeout=240)
        finally:
            await s.close()
    r = asyncio.run(go())
    return r.exceptions, [e.heading.body for e in r.of("heading")], [e.markdown.body for e in r.of("markdown")]


def _ready_logged(log: Path, timeout: float = 240) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if "ready in" in log.read_text(encoding="utf-8", errors="replace"):
            return True
        time.sleep(0.5)
    return False


ENTRIES = pytest.mark.parametrize("entry", ["app.py", "serve.py"])


@ENTRIES
def test_a_first_visitor_while_the_model_loads_sees_the_note_then_the_page(ckpt_root, tmp_path, entry):
    log = tmp_path / "serve.log"
    with Server(ROOT, ckpt_root, log=log, entry=entry) as server:
        errors, headings, texts = _overview(server)      # at once: importing torch alone takes the thread seconds
        assert not errors and "Overview" in headings
        assert any(LOADING[0] in x for x in texts)                   # the note came first, then the page
        assert "ready in" in log.read_text(encoding="utf-8")       # the page waited for the thread


@ENTRIES
def test_a_visitor_after_the_thread_finds_the_model_loaded(ckpt_root, tmp_path, entry):
    log = tmp_path / "serve.log"
    with Server(ROOT, ckpt_root, log=log, entry=entry) as server:
        assert _ready_logged(log), log.read_text(encoding="utf-8")[-2000:]   # before any visitor
        errors, headings, texts = _overview(server)
        assert not errors and "Overview" in headings
        assert not any(LOADING[0] in x for x in texts)              # nothing left to load: no note
    assert "Traceback" not in log.read_text(encoding="utf-8")
