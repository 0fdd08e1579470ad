"""Eight sessions at once on one server's caches and models (viz_explorer/server/cached.py): every result equals a
single session's, computed apart from the caches (the library on a model loaded for the test), for float32 and
bfloat16 weights; a bfloat16 model's float32 copy for gradients is made once however many sessions ask."""
from __future__ import annotations

import threading

import pandas as pd
import pytest
import torch

from viz_transformer import decode, load_checkpoint
from viz_transformer.analysis import summaries
from viz_transformer.run import attribution, lenses

TEXTS = ["我是一名工程师。", "我爱你。", "他是我的朋友。", "今天天气很好。"]
THREADS = 8


def _each_session(work) -> list:
    """work(i) in THREADS threads started together; their results in thread order (an error fails the test)."""
    out, errors, barrier = [None] * THREADS, [], threading.Barrier(THREADS)

    def go(i):
        barrier.wait()
        try:
            out[i] = work(i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=go, args=(i,)) for i in range(THREADS)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors, errors
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_eight_sessions_get_what_one_session_gets(ckpt_root, monkeypatch, dtype):
    from viz_explorer.server import cached
    monkeypatch.setenv("VIZ_DTYPE", dtype)
    cached.load_model.clear()
    cached.memo().clear()
    path = str(ckpt_root / "tiny-zh-en")
    stamp = cached.folder_stamp(path)
    alone = load_checkpoint(path, dtype=dtype)               # one session's reference, no cache in between

    def session(i):
        text = TEXTS[i % len(TEXTS)]
        run = cached.run_text(path, stamp, text)
        return (text, run.output, run.logits.float(), cached.trace(path, stamp, text).output_ids,
                cached.head_stats(path, stamp, text), cached.lens(path, stamp, text, (0, 3)).top_ids)

    for text, output, logits, traced, stats, lens_top in _each_session(session):
        ref = alone.run(text)
        assert output == ref.output and traced == decode(alone, text).output_ids
        assert torch.allclose(logits, ref.logits.float(), atol=1e-5)
        pd.testing.assert_frame_equal(stats, summaries.head_tables(ref)[0], rtol=1e-5)
        assert (lens_top == lenses.lens_view(alone, ref, window=(0, 3)).top_ids).all()
    assert len(cached.loaded_models()) >= 1 and cached.memo().total <= cached.memo().budget


def test_one_float32_copy_for_many_sessions(ckpt_root):
    hm = load_checkpoint(ckpt_root / "tiny-zh-en", dtype="bfloat16")
    copies = _each_session(lambda i: attribution.float32_model(hm.model))
    assert len({id(c) for c in copies}) == 1
    assert next(copies[0].parameters()).dtype == torch.float32
    for a, b in zip(copies[0].parameters(), hm.model.parameters()):
        assert torch.equal(a, b.float())                      # the same weights, widened


def test_a_run_larger_than_the_budget_stays_in_its_session(ckpt_root, monkeypatch):
    """VIZ_CACHE_MB below one run: the shared budget stays what was configured, the run is kept in the asking
    session (its reruns do not run the model again), and another session computes its own."""
    from app_util import open_app, page_file
    from viz_explorer.server import cached
    from viz_transformer.run.capture import HookedModel
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    monkeypatch.setenv("VIZ_CACHE_MB", "0.001")                  # about 1 KiB: no run fits
    cached.memo.clear()
    runs, real = [], HookedModel.run

    def counted(self, *args, **kw):
        runs.append(1)
        return real(self, *args, **kw)
    monkeypatch.setattr(HookedModel, "run", counted)
    try:
        at = open_app(page_file("attention"), text="我爱你。")
        first = len(runs)
        at.run()
        at.run()
        assert not at.exception and at.get("plotly_chart") and len(runs) == first       # no new model run
        assert cached.memo().budget == int(0.001 * 2**20) >= cached.memo().total and cached.memo().stats()["refused"]
        open_app(page_file("attention"), text="我爱你。")
        assert len(runs) > first                                   # another session: a run of its own
    finally:
        cached.memo.clear()                                        # the next test's memo: the default budget


@pytest.mark.parametrize("raw, mb", [("0", 0), ("12.5", 12.5), ("-3", None), ("lots", None), ("nan", None), ("", None)])
def test_the_budget_setting(raw, mb):
    from viz_explorer.server import cached
    expected = cached.DEFAULT_CACHE_MB if mb is None else mb
    assert cached.cache_budget({"VIZ_CACHE_MB": raw}) == int(expected * 2**20)


def test_a_format_function_keeps_the_language_of_its_run(ckpt_root, monkeypatch):
    """No process-wide language: a Chinese session's widget labels stay Chinese however an English session ran after
    it, and outside any run (AppTest calls them from the test thread), as strings.ZH says them."""
    from app_util import open_app, page_file
    from viz_explorer.kit.strings import EN, ZH
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    zh = open_app(page_file("attention"), lang="zh")
    open_app(page_file("attention"), lang="en")                      # another session, in English, afterwards
    block = zh.selectbox(key="at_block")
    assert block.format_func("decoder.cross_attn") == ZH["block.decoder.cross_attn"] != EN["block.decoder.cross_attn"]
