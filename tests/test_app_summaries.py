"""The summary pages through AppTest on the tiny checkpoints: rollout/attribution, head statistics (this text,
a pasted corpus, a click that opens a head on the attention page), export."""
from __future__ import annotations

import math

import numpy as np
import pytest

from app_util import ZH, array, by_key, figure, finish_corpus_jobs, open_app, texts
from viz_transformer import load_checkpoint


def test_rollout_page_shows_attribution_as_the_hand_product(env):
    at = open_app("viz_explorer/pages/experiment/rollout.py")
    run = load_checkpoint(env / "tiny-zh-en").run(ZH)
    hat = [0.5 * run.cache[f"encoder.{i}.self_attn.hook_pattern"][0].double().mean(0).numpy() + 0.5 * np.eye(len(run.src_pieces))
           for i in range(2)]
    cross = run.cache["decoder.1.cross_attn.hook_pattern"][0].double().mean(0).numpy()
    z = array(figure(at, "Source attribution")["data"][0]["z"])
    assert np.allclose(z, cross @ hat[1] @ hat[0], atol=1e-5)
    assert "Jain & Wallace" in texts(at)
    figure(at, "Rollout of the encoder self-attention")
    figure(at, "Rollout of the decoder self-attention")


def test_rollout_page_for_a_language_model(env):
    at = open_app("viz_explorer/pages/experiment/rollout.py", ckpt="tiny-lm", text="Once upon a time")
    z = array(figure(at, "Rollout of the decoder")["data"][0]["z"])
    assert np.allclose(z.sum(-1), 1, atol=1e-5)
    assert not [f for f in at.get("plotly_chart") if "attribution" in f.proto.spec]


def test_head_stats_of_this_text_match_a_hand_entropy(env):
    at = open_app("viz_explorer/pages/experiment/head_stats.py")
    df = at.dataframe[0].value
    run = load_checkpoint(env / "tiny-zh-en").run(ZH)
    p = run.cache["encoder.1.self_attn.hook_pattern"][0, 3].double().numpy()
    want = np.mean([-sum(x * math.log(x) for x in row if x > 0) for row in p])
    row = df[(df["block"] == "encoder self-attention") & (df["layer"] == 1) & (df["head"] == 3)].iloc[0]
    assert row["entropy"] == pytest.approx(want, rel=1e-6)
    assert {"role", "evidence"} <= set(df.columns)
    assert "Measured over 1 sentence." in texts(at)
    grid = figure(at, "encoder self-attention: entropy per head")
    assert array(grid["data"][0]["z"])[1, 3] == pytest.approx(want, rel=1e-5)


def test_head_stats_over_pasted_sentences_with_a_progress_pass(env):
    at = open_app("viz_explorer/pages/experiment/head_stats.py")
    by_key(at.segmented_control, "hs_source").set_value("own").run()
    sentences = ["我是学生。", "我爱你。", "今天天气很好。"]
    by_key(at.text_area, "hs_paste").input("\n".join(sentences) + "\n\n").run()
    assert "Press the button" in texts(at)
    by_key(at.button, "hs_run").click().run(timeout=60)
    finish_corpus_jobs(at)
    assert not at.exception
    assert "Measured over 3 sentences." in texts(at)
    hm = load_checkpoint(env / "tiny-zh-en")
    want = np.mean([hm.run(s).cache["decoder.0.cross_attn.hook_pattern"][0, 2].max(-1).values.mean().item()
                    for s in sentences])
    df = at.dataframe[0].value
    row = df[(df["block"] == "cross-attention (decoder → encoder)") & (df["layer"] == 0) & (df["head"] == 2)].iloc[0]
    assert row["max_weight"] == pytest.approx(want, rel=1e-5)


def test_a_clicked_head_opens_on_the_attention_page(env):
    at = open_app("viz_explorer/pages/experiment/head_stats.py")
    at.session_state["hs_open"] = ("decoder.cross_attn", 1, 3)    # what a click on that grid cell stores
    at.run()
    assert not at.exception
    assert at.title[0].value == "Attention: heads and layers"
    figure(at, "cross-attention (decoder → encoder), layer 1, head 3")


def test_export_page_offers_the_run_and_the_report(env):
    at = open_app("viz_explorer/pages/train/export.py")
    keys = {b.key for b in at.get("download_button")}
    assert {"ex_npz", "ex_json", "ex_report"} <= keys
    assert by_key(at.multiselect, "ex_heads").value == [("encoder.self_attn", 1, 0), ("decoder.self_attn", 1, 0),
                                                         ("decoder.cross_attn", 1, 0)]
