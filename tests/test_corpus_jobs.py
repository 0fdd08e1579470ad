"""Corpus results computed once (viz_explorer/server/corpus_jobs.py): the key follows the weights, texts and settings;
a result comes back from disk equal to what was computed (JSON, never a pickle), and to a second session or a
restarted server at once; one job however many ask; progress, time left and cancel; a failed job is said."""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time

import pandas as pd
import pytest

from app_util import by_key, finish_corpus_jobs, open_app, texts
from viz_explorer.server import corpus_jobs
from viz_transformer import load_checkpoint
from viz_transformer.analysis import summaries

SENTENCES = ["我是学生。", "我爱你。", "今天天气很好。"]


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("VIZ_DATA", str(tmp_path))
    return tmp_path / "corpus"


def test_the_key_follows_the_weights_the_texts_and_the_settings(ckpt_root, tmp_path):
    src = ckpt_root / "tiny-zh-en"
    meta = json.loads((src / "meta.json").read_text(encoding="utf-8"))
    assert corpus_jobs.weights_id(src, 1.0) == meta["weights_sha256"] == hashlib.sha256(
        (src / "model.safetensors").read_bytes()).hexdigest()
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    m = json.loads((copy / "meta.json").read_text(encoding="utf-8"))
    del m["weights_sha256"]                                    # a folder without the digest: its files are hashed
    (copy / "meta.json").write_text(json.dumps(m), encoding="utf-8")
    assert corpus_jobs.weights_id(copy, 2.0) == meta["weights_sha256"]
    key = corpus_jobs.result_key("head_stats", src, 1.0, SENTENCES, {})
    assert key == corpus_jobs.result_key("head_stats", copy, 2.0, SENTENCES, {})           # the same weights
    assert key != corpus_jobs.result_key("head_stats", src, 1.0, SENTENCES[:2], {})
    assert key != corpus_jobs.result_key("head_stats", src, 1.0, SENTENCES, {"layer": 1})
    assert key != corpus_jobs.result_key("attribution", src, 1.0, SENTENCES, {})
    (copy / "model.safetensors").write_bytes((copy / "model.safetensors").read_bytes()[:-1] + b"\0")
    assert corpus_jobs.result_key("head_stats", copy, 3.0, SENTENCES, {}) != key           # other weights


def test_a_result_comes_back_from_disk_as_computed_and_a_bad_file_is_computed_again(data, ckpt_root):
    df = summaries.corpus_head_stats(load_checkpoint(ckpt_root / "tiny-zh-en"), SENTENCES)
    corpus_jobs.save("k1", df)
    pd.testing.assert_frame_equal(corpus_jobs.load("k1"), df)
    (data / "k2.json").write_bytes(b"\x80\x04\x95 a pickle, never unpickled")
    assert corpus_jobs.load("k2") is None and not (data / "k2.json").exists()


def test_the_folder_keeps_to_its_limit_oldest_first(data, monkeypatch):
    df = pd.DataFrame({"x": list(range(2000))})
    for i in range(3):
        corpus_jobs.save(f"r{i}", df)
        time.sleep(0.02)
    size = (data / "r0.json").stat().st_size
    monkeypatch.setenv("VIZ_RESULTS_MB", str(2.5 * size / 2**20))
    corpus_jobs.save("r3", df)
    assert sorted(p.stem for p in data.glob("*.json")) == ["r2", "r3"]
    monkeypatch.setenv("VIZ_RESULTS_MB", "lots")
    assert corpus_jobs.limit_bytes() == int(corpus_jobs.RESULTS_MB * 2**20)


def test_one_job_however_many_ask_with_progress_time_left_and_cancel(data):
    calls, gate = [], threading.Event()

    def compute(progress):
        calls.append(1)
        for i in range(1, 5):
            gate.wait(5)
            progress(i, 4)
        return pd.DataFrame({"x": [1, 2]})
    jobs = [corpus_jobs.start("once", 4, compute) for _ in range(3)]
    assert all(j is jobs[0] for j in jobs) and jobs[0].seconds_left() is None
    gate.set()
    while not jobs[0].finished:
        time.sleep(0.01)
    assert calls == [1] and jobs[0].done == 4 and corpus_jobs.load("once")["x"].tolist() == [1, 2]

    stop = threading.Event()

    def slow(progress):
        for i in range(1, 100):
            progress(i, 100)
            stop.wait(0.02)
        return pd.DataFrame({"x": [0]})
    j = corpus_jobs.start("slow", 100, slow)
    while j.done < 3:
        time.sleep(0.01)
    left = j.seconds_left()
    elapsed = time.monotonic() - j.started
    assert left == pytest.approx(elapsed / j.done * (100 - j.done), rel=0.5)
    corpus_jobs.cancel("slow")
    while not j.finished:
        time.sleep(0.01)
    assert j.cancelled and j.done < 100 and corpus_jobs.load("slow") is None and corpus_jobs.result("slow") is None

    def broken(progress):
        raise ValueError("no sentence here has a piece this model knows")
    j = corpus_jobs.start("broken", 1, broken)
    while not j.finished:
        time.sleep(0.01)
    assert j.error == "no sentence here has a piece this model knows" and corpus_jobs.result("broken") is None


def test_a_second_session_and_a_restarted_server_get_the_result_at_once(data, monkeypatch):
    import streamlit as st
    at = open_app("viz_explorer/pages/experiment/head_stats.py")
    by_key(at.segmented_control, "hs_source").set_value("own").run()
    by_key(at.text_area, "hs_paste").input("\n".join(SENTENCES)).run()
    by_key(at.button, "hs_run").click().run(timeout=60)
    finish_corpus_jobs(at)
    first = at.dataframe[0].value
    assert "Measured over 3 sentences." in texts(at) and len(list(data.glob("*.json"))) == 1
    st.cache_resource.clear()                          # a restarted server: no memo, only the folder
    corpus_jobs.forget_finished()                      # nor the jobs this process ran
    again = open_app("viz_explorer/pages/experiment/head_stats.py")
    by_key(again.segmented_control, "hs_source").set_value("own").run()
    by_key(again.text_area, "hs_paste").input("\n".join(SENTENCES)).run()
    assert not [b for b in again.button if b.key == "hs_run"]                 # nothing to run: it is there
    assert "Measured over 3 sentences." in texts(again)
    pd.testing.assert_frame_equal(again.dataframe[0].value, first)


def test_while_it_runs_every_session_sees_its_progress_and_can_cancel_it(data, monkeypatch):
    """Two sessions on the same corpus: the first starts the job, the second finds it running (no second job, no run
    button): the texts done and the time left, and a Cancel that stops it for both."""
    release = threading.Event()

    def slow(hm, texts, progress=None, workers=1):         # corpus_head_stats's signature
        for i in range(1, len(texts) + 1):
            release.wait(0.2 if i == 1 else 10)
            progress(i, len(texts))
        return pd.DataFrame({"x": [0]})
    monkeypatch.setattr(summaries, "corpus_head_stats", slow)
    pages = []
    for _ in range(2):
        at = open_app("viz_explorer/pages/experiment/head_stats.py")
        by_key(at.segmented_control, "hs_source").set_value("own").run()
        by_key(at.text_area, "hs_paste").input("\n".join(SENTENCES + ["他是老师。"])).run()
        pages.append(at)
    by_key(pages[0].button, "hs_run").click().run()
    while not corpus_jobs.running() or corpus_jobs.running()[0].done < 1:
        time.sleep(0.02)
    for at in pages:
        at.run()
        assert not [b for b in at.button if b.key == "hs_run"] and by_key(at.button, "hs_cancel")
        bar = at.get("progress")[0]
        assert "1 of 4 texts done, about" in bar.proto.text and bar.proto.value == 25
        assert "Press the button" not in texts(at)
    assert len(corpus_jobs.running()) == 1
    by_key(pages[1].button, "hs_cancel").click().run()
    release.set()
    finish_corpus_jobs(pages[0])
    assert "The run was cancelled" in texts(pages[0]) and by_key(pages[0].button, "hs_run")
    assert not list(data.glob("*.json"))


def test_with_ray_asked_for_a_job_runs_there_or_says_why_not_and_runs_here(data, monkeypatch):
    """VIZ_RAY_ADDRESS set: a job with a Ray form runs it (every CPU of the cluster: workers=None); a Ray that does
    not answer is said on the page in one line and the job computes here, with the same result."""
    from viz_transformer.run.ray_pool import RayUnavailable
    here = lambda progress: pd.DataFrame({"x": [1, 2]})            # noqa: E731
    asked = []

    def on_ray(address, workers, progress):
        asked.append((address, workers))
        progress(1, 1)
        return pd.DataFrame({"x": [1, 2]})
    monkeypatch.delenv("VIZ_RAY_ADDRESS", raising=False)
    j = corpus_jobs.start("unset", 1, here, on_ray)
    while not j.finished:
        time.sleep(0.01)
    assert asked == [] and j.where is None and corpus_jobs.ray_address() is None     # unset: here, Ray never asked
    monkeypatch.setenv("VIZ_RAY_ADDRESS", " ray://head:10001 ")
    j = corpus_jobs.start("on ray", 1, here, on_ray)
    while not j.finished:
        time.sleep(0.01)
    assert asked == [("ray://head:10001", None)] and j.where == "ray://head:10001" and j.fell_back is None

    def unreachable(address, workers, progress):
        raise RayUnavailable("cannot start or reach Ray at ray://head:10001: Connection refused")
    j = corpus_jobs.start("fell back", 1, here, unreachable)
    while not j.finished:
        time.sleep(0.01)
    assert j.error is None and j.where is None and "Connection refused" in j.fell_back
    assert corpus_jobs.result("fell back")["x"].tolist() == [1, 2]
    assert corpus_jobs.ray_form(lambda *a, **k: None, "/models/nllb#zho_Hans>eng_Latn") is None   # a pair: here only


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_head_statistics_page_says_in_one_line_that_ray_did_not_answer(data, monkeypatch, lang):
    monkeypatch.setenv("VIZ_RAY_ADDRESS", "ray://127.0.0.1:1")
    from viz_transformer.run import ray_pool

    def no_ray(*args, **kwargs):
        raise ray_pool.RayUnavailable("cannot start or reach Ray at ray://127.0.0.1:1: Connection refused")
    monkeypatch.setattr(ray_pool, "map_runs", no_ray)
    monkeypatch.setattr("viz_transformer.analysis.corpus_ray.map_runs", no_ray)
    at = open_app("viz_explorer/pages/experiment/head_stats.py", lang=lang)
    by_key(at.segmented_control, "hs_source").set_value("own").run()
    by_key(at.text_area, "hs_paste").input("\n".join(SENTENCES + [lang])).run()
    by_key(at.button, "hs_run").click().run(timeout=60)
    finish_corpus_jobs(at)
    said = [c.value for c in at.caption if "Connection refused" in c.value]
    assert len(said) == 1 and ("Ray did not answer" if lang == "en" else "Ray 没有响应") in said[0]
    assert ("Measured over 4 sentences." if lang == "en" else "4") in texts(at)
