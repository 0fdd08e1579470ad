"""One way into the app's caches: every result a page computes (a model's facts, the compared models' views, training
snapshots and roles, the q·k variance, a lesson and its facts, a bank's facts, a model's script) is kept in the one
byte-bounded memo (viz_explorer.server.cached.memo), keyed by its function's qualified name and arguments, and shared
as one object; the only other caches hold loaded models. Each value is checked against its own computation made
here without any cache."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import viz_explorer
from viz_explorer.server import cached
from viz_explorer.server.byte_lru import ByteLRU

ROOT = Path(__file__).resolve().parent.parent
ZH = str(ROOT / "checkpoints" / "zh-en")
MODEL_CACHES = {"viz_explorer.server.cached.memo", "viz_explorer.server.cached.load_model",
                "viz_explorer.server.cached.sentence_pipeline"}


def _names_in_memo() -> set:
    return {key[0] for key in cached.memo().keys()}


@pytest.fixture
def fresh_memo(monkeypatch):
    memo = ByteLRU(cached.cache_budget())
    monkeypatch.setattr(cached, "memo", lambda: memo)
    return memo


def test_no_streamlit_cache_but_the_models_and_the_memo_itself():
    """Every module of the app imported; each function wrapped by st.cache_data or st.cache_resource listed: only the
    loaded models (and the memo that holds the rest) are cached that way."""
    from streamlit.runtime.caching.cache_utils import CachedFunc
    found = set()
    for info in pkgutil.walk_packages(viz_explorer.__path__, "viz_explorer."):
        if ".pages." in info.name:                # page scripts run as scripts, never imported
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, CachedFunc) and getattr(value, "__module__", info.name) == info.name:
                found.add(f"{info.name}.{name}")
    assert found == MODEL_CACHES


def test_a_models_facts_and_training_roles_are_the_memos_shared_values(fresh_memo):
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import summaries
    from viz_transformer.training.snapshots import load_training_snapshots
    stamp = cached.folder_stamp(Path(ZH))
    facts = cached.model_facts(ZH, stamp)
    assert facts.n_params == sum(p.numel() for p in load_checkpoint(ZH).model.parameters())
    assert cached.model_facts(ZH, stamp) is facts                    # shared, not a copy per call
    roles = cached.training_roles(ZH, stamp)
    pd.testing.assert_frame_equal(roles, summaries.roles_over_training(load_training_snapshots(ZH)))
    assert cached.training_roles(ZH, stamp) is roles
    assert {"viz_explorer.server.cached.model_facts", "viz_explorer.server.cached.snapshots",
            "viz_explorer.server.cached.training_roles"} <= _names_in_memo()


def test_a_compared_models_view_is_in_the_memo_and_counted_in_its_bytes(fresh_memo):
    from viz_transformer import load_checkpoint
    info = next(iter(cached.comparison().values()))
    stamp = cached.folder_stamp(info.path)
    text = "我是一名工程师。"
    view = cached.arch_view(str(info.path), stamp, text)
    assert view["output"] == load_checkpoint(info.path).run(text).output
    assert fresh_memo.keys() and fresh_memo.total > 0 and "viz_explorer.server.cached.arch_view" in _names_in_memo()
    assert cached.arch_view(str(info.path), stamp, text) is view


def test_a_lessons_facts_and_question_are_in_the_memo(fresh_memo):
    from viz_explorer.lessons import lesson_file, lesson_mode
    name = "attention-step-by-step"
    lesson = lesson_mode.load(name)
    assert lesson == lesson_file.load_lesson(name, lesson_mode.folder())
    i = next(k for k, step in enumerate(lesson.steps) if step.facts and step.question)
    q, _ = lesson_mode.step_question(name, i)
    assert lesson_mode.step_question(name, i)[0] is q
    assert {"viz_explorer.lessons.lesson_mode._load", "viz_explorer.lessons.lesson_mode._facts",
            "viz_explorer.lessons.lesson_mode._question"} <= _names_in_memo()


def test_a_memo_that_keeps_nothing_gives_the_same_answers(monkeypatch):
    """VIZ_CACHE_MB=0: nothing is kept, every value is computed for its call and equal to the kept one."""
    from viz_transformer.analysis import attention_maths
    empty = ByteLRU(0)
    monkeypatch.setattr(cached, "memo", lambda: empty)
    stamp = cached.folder_stamp(Path(ZH))
    assert cached.model_facts(ZH, stamp).n_params == cached.model_facts(ZH, stamp).n_params
    got, want = cached.qk_variance(), attention_maths.qk_variance()
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert len(empty) == 0
