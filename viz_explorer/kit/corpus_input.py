"""A corpus of one's own, uploaded or pasted (one sentence a line), for the pages that compute over a corpus (head
statistics, attention vs attribution): the sentences, or None while there are none, with the reason said when there
is one (not UTF-8 text; more than corpora.MAX_LINES sentences, which the command line reads instead)."""
from __future__ import annotations

from typing import Optional

import streamlit as st

from viz_explorer.kit.strings import t
from viz_transformer.training import corpora


def own_corpus(prefix: str) -> Optional[list[str]]:
    up = st.file_uploader(t("hs.upload"), type=["txt", "tsv", "csv"], key=f"{prefix}_upload")
    pasted = st.text_area(t("hs.paste"), key=f"{prefix}_paste", height=120)
    try:
        raw = up.getvalue().decode("utf-8") if up is not None else pasted
    except UnicodeDecodeError as e:
        st.error(t("hs.bad_file", error=e))
        return None
    if not raw.strip():
        return None
    try:
        return corpora.parse(raw)
    except corpora.TooLong as e:
        st.error(t("hs.too_many", n=e.n, most=e.most))
        return None
