"""What a page says about the text itself, once, above everything else: the part of a too-long text the
model did not read, and a text written in another script than the model reads (viz_transformer.analysis.scripts)."""
from __future__ import annotations

import streamlit as st

from viz_explorer.kit import widgets
from viz_explorer.server import cached
from viz_explorer.kit.strings import t
from viz_transformer.analysis import scripts
from viz_transformer.core.encoding import left_out

QUOTE = 30                  # characters of the left-out text quoted in the notice


@cached.heavy
def _model_script(path: str, stamp: float) -> str | None:
    hm = cached.load_model(path, stamp)
    return scripts.model_script(hm.tokenizer, hm.meta)


def cut_text(ctx) -> str:
    """The notice of a cut text in plain words ("" when nothing was cut): how much the model reads, and
    where the left-out part begins (a source) or ends (a language model's prompt)."""
    run, cfg = ctx.run, ctx.hm.cfg
    if not run.n_cut:
        return ""
    gone = left_out(ctx.hm.tokenizer, cfg, ctx.text, run.input)
    quote = gone[:QUOTE] if run.cut_at == "end" else gone[-QUOTE:]
    return t(f"sidebar.cut.{run.cut_at}", max_len=cfg.max_len, n=run.n_cut, chars=len(gone),
             cut=widgets.md_escape(" ".join(quote.split())))


def script_text(ctx) -> str:
    """The one line for a text in another script than the model's ("" when it matches or is unknown)."""
    source = _model_script(str(ctx.path), ctx.stamp)
    got = scripts.mismatch(ctx.text, source)
    if got is None:
        return ""
    return t(f"in.mismatch.{ctx.kind}", model=t(f"in.script.{source}"), text=t(f"in.script.{got}"))


def show(ctx) -> None:
    """Both notes, each at most once per page (call it where the page starts)."""
    if ctx.run is None:
        return
    if line := script_text(ctx):
        st.warning(line, icon=":material/translate:")
    if line := cut_text(ctx):
        st.warning(line, icon=":material/content_cut:")
