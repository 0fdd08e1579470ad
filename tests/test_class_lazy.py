"""The live class's store imports sqlalchemy on its first use, not with the first page's modules (a fresh
server's first page does not wait for it), and creates its tables on whatever engine it is first handed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow                  # a fresh interpreter importing torch
def test_the_first_pages_modules_do_not_import_sqlalchemy():
    # what viz_explorer/startup/load.py imports before the first page, in a fresh interpreter
    code = ("import sys\n"
            "from viz_explorer.startup import load\n"
            "load._import_light()\n"
            "from viz_explorer.server import cached, memory\n"
            "from viz_explorer.kit import context, registry, session_guard, sidebar\n"
            "from viz_explorer.lessons import lesson_mode, links\n"
            "from viz_explorer.classroom import live_class, class_present\n"
            "assert 'torch' in sys.modules\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_class_on_an_engine_made_before_the_store_was_used(tmp_path):
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'bare.sqlite3'}")     # no table on it yet
    code, secret = cr.create_class("attention-step-by-step", eng)
    assert cr.lesson_and_step(code, eng) == ("attention-step-by-step", 0)
    assert cr.is_teacher(code, secret, eng)
    with eng.connect() as conn:
        names = set(sa.inspect(conn).get_table_names())
    assert {"classes", "class_members", "class_hits", "class_votes", "class_questions", "class_focus"} <= names
    me = "b" * 16
    cr.join(code, me, "", eng)
    assert cv.answer(code, me, "q", "A", ["A", "B"], eng) == 1
    eng.dispose()
