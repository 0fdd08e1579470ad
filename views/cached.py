"""The app's caches: one loaded model per checkpoint folder, and the runs and traces made with it.

Keys include the folder's newest file time, so a checkpoint rewritten by training is reloaded.
"""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from viz_transformer import analysis, decode, load_checkpoint
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
