"""Every page on a T5 folder: a tiny random T5 v1.0 saved by transformers (tests/hf_t5_util.py), in English
and in Chinese, with no exception; the positional page draws each head's bias by offset, the buckets, and the bias
matrix for the text (checked against transformers' compute_bias); the Overview's diagram draws the bias, not a
positional table; beam search on the decoding page starts from the folder's num_beams."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import hf_t5_util as U
from app_util import array, by_key, figure, figures, open_app
from viz_explorer.kit.registry import PAGES, page_path
from viz_explorer.kit.strings import EN, fill
from viz_explorer.kit.strings_zh import ZH
from viz_transformer import load_checkpoint

pytestmark = pytest.mark.slow          # transformers builds the model folder

NAME = "t5-v1.0-relu-tied"
TEXT = U.TEXTS[3]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("t5-checkpoints")
    U.build_t5(U.T5_BY_ID[NAME], root / NAME)
    return root


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_opens_on_a_t5_folder(env, lang):
    for spec in PAGES:
        at = open_app(page_path(spec), ckpt=NAME, text=TEXT, lang=lang)       # asserts no exception
        assert not at.error, (spec.name, [e.value for e in at.error])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_positional_page_draws_the_bias_by_offset_and_for_the_text(env, lang):
    from transformers import AutoModelForSeq2SeqLM
    table = ZH if lang == "zh" else EN
    hm = load_checkpoint(env / NAME)
    run = hm.run(TEXT)
    at = open_app(page_path(next(p for p in PAGES if p.name == "positional")), ckpt=NAME, text=TEXT, lang=lang)
    shown = " ".join(m.value for m in at.markdown)
    assert table["pe.rel.rope"][:12] in shown
    by_offset = figure(at, table["pe.rel.by_offset_title"].format(part=table["pe.rel.encoder"]))
    assert len(by_offset["data"]) == hm.cfg.n_heads
    ref = AutoModelForSeq2SeqLM.from_pretrained(env / NAME, attn_implementation="eager").eval()
    attn = ref.encoder.block[0].layer[0].SelfAttention
    with torch.no_grad():
        want = attn.compute_bias(len(run.src_pieces), len(run.src_pieces))[0, 0].numpy()
        row = attn.compute_bias(1, 2 * 20 + 1, past_seen_tokens=20)[0, :, 0].numpy()   # offsets -20 .. 20
    x = array(by_offset["data"][0]["x"])
    for h in range(hm.cfg.n_heads):
        ys = array(by_offset["data"][h]["y"])
        np.testing.assert_allclose(ys[(x >= -20) & (x <= 20)], row[h], atol=1e-6)
    buckets = array(figure(at, fill(table["pe.rel.buckets_title"], b=hm.cfg.rel_buckets))["data"][0]["y"])
    half = hm.cfg.rel_buckets // 2                   # both ways: each side half the buckets; "ahead by 0" never occurs
    assert set(buckets.tolist()) == set(range(hm.cfg.rel_buckets)) - {half}
    matrix = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith(
        table["pe.rel.matrix_title"].split("{head}")[0] + "0"))
    np.testing.assert_allclose(array(matrix["data"][0]["z"]), want, atol=1e-6)
    by_key(at.radio, "pe_rel_part").set_value("decoder").run(timeout=60)
    assert not at.exception
    f = figure(at, table["pe.rel.by_offset_title"].format(part=table["pe.rel.decoder"]))
    assert array(f["data"][0]["x"]).max() == 0                              # causal: no offsets ahead


def test_overview_diagram_draws_the_bias(env):
    at = open_app("viz_explorer/pages/look/overview.py", ckpt=NAME, text=TEXT)
    texts = " ".join(a["text"] for f in figures(at) for a in f["layout"].get("annotations", []))
    assert "Relative position bias" in texts and "Positional encoding" not in texts


def test_decoding_page_beam_search_with_the_generation_config(env):
    hm = load_checkpoint(env / NAME)
    at = open_app("viz_explorer/pages/step/decoding.py", ckpt=NAME, text=TEXT)
    by_key(at.button_group, "dc_strategy").set_value("beam").run(timeout=60)
    assert by_key(at.slider, "dc_width").value == hm.cfg.num_beams == 3
    assert not at.exception, [e.value for e in at.exception]


def test_step_by_step_reproduces_t5s_pattern(env):
    """The step page on T5: divisor 1 and the stack's bias by default, so its weights are the captured pattern, and
    PyTorch's SDPA with the same bias agrees."""
    hm = load_checkpoint(env / NAME)
    run = hm.run(TEXT)
    at = open_app("viz_explorer/pages/step/step_by_step.py", ckpt=NAME, text=TEXT)
    assert EN["st.relative"] in [c.value for c in at.caption]
    assert by_key(at.slider, "st_div_8_t5").value == 1.0
    assert by_key(at.slider, "st_div_8_t5").label == fill(EN["st.divisor_unscaled"], sqrt=1.0)     # not "√d_k = 1.00"
    assert not at.exception, [e.value for e in at.exception]
    from viz_transformer.analysis import attention_maths, patterns
    from viz_transformer.core.positional import position_terms
    for block in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"):
        q, k, v, mask = patterns.head_qkv(run.cache, block, 1, 2)
        div, bias = position_terms(run.cache, patterns.hook_name(block, 1, "hook_pattern").rsplit(".", 1)[0], 2)
        hs = attention_maths.attention_steps(q, k, v, mask, div, bias)
        torch.testing.assert_close(hs.weights, run.cache[patterns.hook_name(block, 1, "hook_pattern")][0, 2])
        assert attention_maths.sdpa_difference(hs, q, k, v, mask, div, bias)[0] < 1e-5
