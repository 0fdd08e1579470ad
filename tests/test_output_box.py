"""widgets.output: a model's text (a translation, a decoded sequence) shown as plain text, whatever it holds."""
from __future__ import annotations

import textwrap

from streamlit.testing.v1 import AppTest

from hostile import HOSTILE, INJECT

MARKUP = ["**bold** _it_ $x^2$ :red[red] :material/home:", "<b>tag</b> &amp; [link](http://x)", "[begin] ‖ ▁I ▁am"]


def _page(texts):
    from viz_explorer.kit import page_parts
    for i, text in enumerate(texts):
        page_parts.output(text, f"t{i}")


def test_the_output_box_shows_every_text_as_itself_never_as_markdown_or_html():
    texts = [v for k, v in HOSTILE.items() if k != "surrogates"] + list(INJECT.values()) + MARKUP   # (not UTF-8)
    at = AppTest.from_function(_page, args=(texts,), default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    # st.text dedents and strips, nothing else: the reference is the text itself, so cleaned
    assert [e.value for e in at.text] == [textwrap.dedent(t).strip() for t in texts]
    assert not at.markdown and not at.get("html")             # no text went through Markdown or HTML
