"""The Attention vs attribution page through AppTest on the tiny checkpoints, in English and Chinese: the rows
are the library's scores for the chosen step, τ with occlusion in the table, the sentence that names the best
method, the step slider, a pasted corpus measured with its progress pass, and a model that writes nothing."""
from __future__ import annotations

import numpy as np
import pytest

from app_util import ZH, array, figure, finish_corpus_jobs, open_app, texts
from viz_transformer import load_checkpoint
from viz_transformer.analysis import attribution as AA

PAGE = "viz_explorer/pages/experiment/attribution.py"


@pytest.mark.parametrize("lang", [None, "zh"])
def test_the_rows_are_each_methods_scores_and_tau_is_against_occlusion(env, lang):
    at = open_app(PAGE, lang=lang)
    hm = load_checkpoint(env / "tiny-zh-en")
    run = hm.run(ZH)
    at.slider(key="ab_step").set_value(2).run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    fig = figure(at, "2")
    raw = array(fig["data"][0]["customdata"])
    for row, m in enumerate(AA.METHODS):
        want = AA.attribute(hm, ZH, 2, m, run=run).numpy()
        np.testing.assert_allclose(raw[row], want, rtol=1e-4, atol=1e-6)
    occ = raw[-1]
    table = at.dataframe[0].value
    assert len(table) == len(AA.COMPARED)
    np.testing.assert_allclose(table.iloc[:, 1].to_numpy(dtype=float),
                               [AA.kendall_tau(raw[i], occ) for i in range(len(AA.COMPARED))], atol=1e-9)
    shown = texts(at)
    assert ("agrees best with occlusion" in shown) if lang is None else ("与遮挡法最一致" in shown)


def test_a_language_model_and_a_pasted_corpus(env):
    at = open_app(PAGE, ckpt="tiny-lm", text="Once upon a time")
    assert figure(at, "Step 1")
    assert "Pick a set of sentences" in texts(at) and not [b for b in at.button if b.key == "ab_run"]
    at.segmented_control(key="ab_source").set_value("own").run(timeout=120)
    at.text_area(key="ab_paste").input("The cat sat.\nI like tea.").run(timeout=120)
    at.button(key="ab_run").click().run(timeout=300)
    finish_corpus_jobs(at)
    assert not at.exception, [e.value for e in at.exception]
    summary = at.dataframe[-1].value
    assert list(summary.iloc[:, 0]) == ["attention", "rollout", "value norm", "grad × input", "integrated gradients"]
    assert "agrees best with occlusion (median" in texts(at)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lesson_step_reveals_occlusion_with_attention_beside_it(lang):
    from streamlit.testing.v1 import AppTest
    from app_util import APP
    from viz_explorer.lessons import lesson_file
    lesson = lesson_file.load_lesson("attention-step-by-step")
    i = next(k for k, s in enumerate(lesson.steps) if s.question.get("kind") == "top_piece")
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["lesson"], at.query_params["step"], at.query_params["lang"] = ("attention-step-by-step",
                                                                                  str(i + 1), lang)
    at.run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    qid = f"attention-step-by-step/{i + 1}"              # quiz.question_id: the step as the address counts it
    pills = next(b for b in at.button_group if b.key == f"qz_pick_{qid}")
    pills.set_value(pills.options[0]).run()
    next(b for b in at.button if b.key == f"qz_reveal_{qid}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    fig = figure(at, "occlusion" if lang == "en" else "遮挡法")
    assert list(fig["data"][0]["y"]) == (["occlusion", "attention"] if lang == "en" else ["遮挡", "注意力"])
    shown = texts(at)
    assert ("drops log p(“▁engineer”) the most" if lang == "en" else "下降最多") in shown


@pytest.mark.parametrize("long_input", [False, True], ids=["rollout-only", "rollout-and-gradients"])
def test_a_rollout_over_too_many_weights_waits_for_the_button(env, monkeypatch, long_input):
    hm = load_checkpoint(env / "tiny-zh-en")
    run = hm.run(ZH)
    n = AA.n_pieces(run)
    cfg = hm.cfg                                              # the encoder's layers and heads over n source pieces
    assert AA.rollout_cells(cfg, n) == cfg.n_encoder_layers * cfg.n_heads * len(run.src_ids) ** 2
    monkeypatch.setattr(AA, "ROLLOUT_CELLS", AA.rollout_cells(cfg, n) - 1)
    if long_input:
        monkeypatch.setattr(AA, "AUTO_PIECES", 4)
    at = open_app(PAGE)
    assert not at.exception, [e.value for e in at.exception]
    assert "waits for the button" in texts(at)
    assert list(figure(at, "Step 1")["data"][0]["y"]) == (["attention", "value norm"] if long_input else
                                                            ["attention", "value norm", "grad × input",
                                                             "integrated gradients", "occlusion"])
    go = next(b for b in at.button if b.key == "ab_go")
    assert go.label == ("Compute the rollout, occlusion and the gradients" if long_input else "Compute the rollout")
    go.click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    raw = array(figure(at, "Step 1")["data"][0]["customdata"])
    assert len(raw) == len(AA.METHODS) and "waits for the button" not in texts(at)
    np.testing.assert_allclose(raw[1], AA.attribute(hm, ZH, 1, "rollout", run=run).numpy(), rtol=1e-4, atol=1e-6)


def test_a_long_input_waits_for_the_button_and_shows_the_cheap_methods_first(env, monkeypatch):
    monkeypatch.setattr(AA, "AUTO_PIECES", 4)                 # 我是一名工程师。 has more pieces than that
    at = open_app(PAGE)
    assert "more than 4" in texts(at)
    assert list(figure(at, "Step 1")["data"][0]["y"]) == ["attention", "rollout", "value norm"]
    assert not at.dataframe                                   # no τ before occlusion has run
    next(b for b in at.button if b.key == "ab_go").click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert len(figure(at, "Step 1")["data"][0]["y"]) == len(AA.METHODS) and len(at.dataframe[0].value) == 5
