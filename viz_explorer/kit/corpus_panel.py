"""A corpus view's run button and progress, shared by the pages that compute over a corpus (head statistics,
attention vs attribution): the result when any session (or an earlier server) computed it, else the button that starts
the one job for it (server/corpus_jobs.py), else that job's progress, time left and a Cancel button, refreshed every
second until it ends."""
from __future__ import annotations

from typing import Callable, Optional

import streamlit as st

from viz_explorer.kit.strings import t
from viz_explorer.server import cached, corpus_jobs

REFRESH_S = 1.0


def duration(seconds: float) -> str:
    """A time left as the page says it: "40 s", "3 min 5 s"."""
    s = max(0, int(round(seconds)))
    return t("cj.seconds", sec=s) if s < 60 else t("cj.minutes", mins=s // 60, sec=s % 60)


@st.fragment(run_every=REFRESH_S)
def _running(key: str, prefix: str) -> None:
    j = corpus_jobs.job(key)
    if j is None or j.finished:
        st.rerun()                                   # the whole page: its result, or the button again
    left = j.seconds_left()
    st.progress(j.done / max(j.total, 1), text=t("cj.progress", done=j.done, total=j.total)
                + (t("cj.left", left=duration(left)) if left is not None else "")
                + (t("cj.on_ray", address=j.where) if j.where else ""))
    st.button(t("cj.cancel"), key=f"{prefix}_cancel", on_click=corpus_jobs.cancel, args=(key,),
              icon=":material/stop:")


def running(key: str) -> bool:
    """Whether the job for key is at work (the page then says nothing of a button to press)."""
    j = corpus_jobs.job(key)
    return j is not None and not j.finished


def result(key: str, n_texts: int, compute: Callable, run_label: str, prefix: str,
           on_ray: Optional[Callable] = None) -> Optional[object]:
    """The corpus result under `key` (corpus_jobs.result_key), or None while there is none: then the run button
    (`run_label`) or the running job's progress is shown. compute(progress) computes it (a functools.partial over
    the model and the texts: it runs in the job's thread, after this page run has ended); on_ray, its Ray form
    (corpus_jobs.ray_form), used when VIZ_RAY_ADDRESS is set."""
    found = cached.corpus_result(key)
    j = corpus_jobs.job(key)
    if j is not None and j.finished and j.fell_back:
        st.caption(t("cj.fell_back", error=j.fell_back))
    if found is not None:
        return found
    if j is not None and not j.finished:
        _running(key, prefix)
        return None
    if j is not None and j.error:
        st.error(t("cj.failed", error=j.error))
    elif j is not None and j.cancelled:
        st.caption(t("cj.cancelled"))
    if st.button(run_label, key=f"{prefix}_run", type="primary", icon=":material/play_arrow:"):
        corpus_jobs.start(key, n_texts, compute, on_ray)
        st.rerun()
    return None
