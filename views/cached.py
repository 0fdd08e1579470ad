"""The app's caches: one loaded model per checkpoint folder, and the runs and traces made with it.

Keys include the folder's newest file time, so a checkpoint rewritten by training is reloaded.
"""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from viz_transformer import analysis, decode, interventions, lab, load_checkpoint
from viz_transformer import capture as runs

ROOT = Path(__file__).resolve().parent.parent


def checkpoints_root() -> Path:
    return Path(os.environ.get("VIZ_CHECKPOINTS") or ROOT / "checkpoints")


def folder_stamp(path) -> float:
    """Newest mtime of a checkpoint folder's files: part of every cache key."""
    if path is None:
        return 0.0
    return max((f.stat().st_mtime for f in Path(path).glob("*") if f.is_file()), default=0.0)


@st.cache_resource(show_spinner=False, max_entries=3)
def load_model(path: str, stamp: float):
    return load_checkpoint(path)


@st.cache_resource(show_spinner=False, max_entries=6)
def run_text(path: str, stamp: float, text: str):
    return load_model(path, stamp).run(text)


@st.cache_resource(show_spinner=False, max_entries=12)
def trace(path: str, stamp: float, text: str, **params):
    return decode(load_model(path, stamp), text, **params)


@st.cache_resource(show_spinner=False, max_entries=4)
def padded(path: str, stamp: float, text: str, other: str):
    return runs.padded_batch(load_model(path, stamp), text, other)


@st.cache_data(show_spinner=False)
def qk_variance() -> dict:
    return analysis.qk_variance()


# -- the lab: intervened runs, keyed by what was knocked out ------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=4)
def head_means(path: str, stamp: float, text: str):
    return interventions.head_means(load_model(path, stamp), text)


def ablation_hooks(path: str, stamp: float, text: str, heads: tuple, mode: str) -> list:
    means = head_means(path, stamp, text) if mode == "mean" and heads else None
    return interventions.head_ablation_hooks(list(heads), mode, means, cfg=load_model(path, stamp).cfg)


def ablated(path: str, stamp: float, text: str, heads: tuple, mode: str):
    """(the intervened run, the logits of the original run's exact ids under the same ablation).
    With no head knocked out that is the original run and its own logits: no second model run."""
    if not heads:
        run = run_text(path, stamp, text)
        return run, run.logits
    return _ablated(path, stamp, text, heads, mode)


@st.cache_resource(show_spinner=False, max_entries=8)
def _ablated(path: str, stamp: float, text: str, heads: tuple, mode: str):
    hm = load_model(path, stamp)
    hooks = ablation_hooks(path, stamp, text, heads, mode)
    return hm.run(text, fwd_hooks=hooks), lab.forced_logits(hm, run_text(path, stamp, text), hooks)


@st.cache_resource(show_spinner=False, max_entries=4)
def positions_off(path: str, stamp: float, text: str):
    hm = load_model(path, stamp)
    return hm.run(text, fwd_hooks=interventions.positions_off_hooks(hm))


@st.cache_resource(show_spinner=False, max_entries=8)
def order_test(path: str, stamp: float, text: str, how: str, positions: bool):
    hm = load_model(path, stamp)
    return lab.order_test(hm, text, how, () if positions else interventions.positions_off_hooks(hm))
