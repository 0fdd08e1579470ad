"""The shared Context (checkpoint, text, model, run) that app.py builds and every page reads."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import streamlit as st

from viz_explorer.server.cached import folder_stamp
from viz_explorer.kit import input_note
from viz_explorer.kit.strings import t

CTX = "_viz_ctx"


@dataclass
class Context:
    name: str
    path: Optional[Path]
    text: str
    hm: object = None          # HookedModel
    run: object = None         # Run
    error: Optional[str] = None
    error_title: str = "msg.broken"

    @property
    def stamp(self) -> float:
        return folder_stamp(self.path)

    @property
    def kind(self) -> str:
        return "translator" if self.hm is not None and self.hm.cfg.is_translator else "lm"


def need_run(require_text: bool = True) -> Context:
    """The shared context for a page; stops the page with a message when there is nothing to show."""
    ctx: Optional[Context] = st.session_state.get(CTX)
    if ctx is None or ctx.error:
        st.error(t(ctx.error_title if ctx is not None else "msg.broken"))
        if ctx is not None and ctx.error:
            st.code(ctx.error, language=None, wrap_lines=True)
        st.stop()
    if require_text and ctx.run is None:
        st.info(t("msg.empty"))
        st.stop()
    input_note.show(ctx)                     # a text cut short, or in another script than the model reads
    return ctx
