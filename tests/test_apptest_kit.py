"""The AppTest kit's shortcuts (tests/conftest.py, tests/app_util.py) keep the app tests' meaning: a script edited
between runs is run as it now reads, and open_app's first run opens the page asked for, as a shared link does,
also where the page's address differs from its file's name."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from app_util import open_app
from viz_explorer.kit.strings import t


def test_an_edited_script_runs_as_it_now_reads(tmp_path):
    script = tmp_path / "edited.py"
    for word in ("one", "two", "one"):
        script.write_text(f"import streamlit as st\nst.markdown({word!r})\n", encoding="utf-8")
        at = AppTest.from_file(str(script)).run()
        assert [m.value for m in at.markdown] == [word]
        script.write_text(script.read_text(encoding="utf-8") + "st.markdown('more')\n", encoding="utf-8")
        assert [m.value for m in at.run().markdown] == [word, "more"]        # the same session's next run too


def test_the_first_run_opens_the_page_asked_for(env):
    at = open_app("viz_explorer/pages/look/positional_encoding.py")       # its address is /positional
    assert [x.value for x in at.title] == [t("pe.title")]
    at = open_app("viz_explorer/pages/look/masks.py", lang="zh")
    from viz_explorer.kit.strings_zh import ZH
    assert [x.value for x in at.title] == [ZH["mk.title"]]
