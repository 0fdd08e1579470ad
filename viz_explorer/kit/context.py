"""The shared Context (checkpoint, text, model, run) that app.py builds and every page reads."""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import streamlit as st

from viz_explorer.server.cached import folder_stamp, run_text
from viz_explorer.kit import input_note
from viz_explorer.kit.strings import t

CTX = "_viz_ctx"


@dataclass
class Context:
    """app.py hands it to the page through session state, where it stays until the session's next run; so it holds
    the text's Run only while the page run that made it lasts (let_go): a session must not keep a run alive beside
    the memo's budget, up to every visitor's last one (and a closed session's, for Streamlit's two minutes). Read
    after that, `run` is the memo's, computed again if the memo let it go."""
    name: str
    path: Optional[Path]
    text: str
    hm: object = None          # HookedModel
    error: Optional[str] = None
    error_title: str = "msg.broken"
    _run: object = field(default=None, repr=False)        # the text's Run, held
    _run_ref: object = field(default=None, repr=False)    # after let_go: a weak reference to it

    @property
    def run(self):
        """The text's Run (None when there is no text)."""
        if self._run_ref is None:
            return self._run
        run = self._run_ref()
        if run is None:              # let go of, and evicted since
            run = run_text(str(self.path), self.stamp, self.text)
            self._run_ref = weakref.ref(run)
        return run

    @run.setter
    def run(self, value) -> None:
        self._run, self._run_ref = value, None

    def let_go(self) -> None:
        """The page run is over: keep only a weak reference to the run (the memo keeps the run itself)."""
        if self._run is not None:
            self._run, self._run_ref = None, weakref.ref(self._run)

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
