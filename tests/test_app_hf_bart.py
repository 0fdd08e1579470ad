"""An NLLB-style folder (M2M100 with NllbTokenizer, tests/hf_bart_util.py) through AppTest: the Overview opens in
both UI languages with its source and target selectors, Chinese text starts as Chinese -> English, a new pair
reruns the model with that pair (the decoder's forced code is the new target's), and the pages label the pair."""
from __future__ import annotations

import pytest

import hf_bart_util as B
from app_util import by_key, open_app, tables
from viz_transformer import load_checkpoint

pytestmark = pytest.mark.slow          # transformers builds the model folder

NAME = "nllb"
TEXT = "我爱你。"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-translators")
    B.build(B.BY_ID[NAME], root / NAME)
    return root


def _captions(at) -> str:
    return " ".join(c.value for c in at.sidebar.caption)


@pytest.mark.parametrize("lang,label", [("en", "Languages: zho_Hans → eng_Latn"), ("zh", "语言：zho_Hans → eng_Latn")])
def test_overview_offers_the_pair_and_labels_it(env, lang, label):
    at = open_app(ckpt=NAME, text=TEXT, lang=lang)
    src, tgt = by_key(at.selectbox, "lang_src"), by_key(at.selectbox, "lang_tgt")
    assert (src.value, tgt.value) == ("zho_Hans", "eng_Latn")                  # Chinese text: Chinese -> English
    assert set(src.options) == set(B.NLLB_CODES)
    assert src.label == ("Source language" if lang == "en" else "源语言")
    assert label in _captions(at)


def test_a_new_target_reruns_with_its_code_and_leaves_the_model_alone(env):
    hm = load_checkpoint(env / NAME)
    at = open_app(ckpt=NAME, text=TEXT)
    by_key(at.selectbox, "lang_tgt").set_value("fra_Latn").run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    assert "Languages: zho_Hans → fra_Latn" in _captions(at)
    want = hm.with_languages("zho_Hans", "fra_Latn").run(TEXT)
    assert want.tgt_pieces[1] == "fra_Latn"
    pieces = " ".join(str(v) for df in tables(at) for v in df.to_numpy().ravel())
    assert "fra_Latn" in pieces                                                 # the decoder's input table
    at.switch_page("viz_explorer/pages/look/attention.py").run(timeout=60)    # the choice outlives the Overview
    assert not at.exception, [e.value for e in at.exception]
    assert "Languages: zho_Hans → fra_Latn" in _captions(at)
    other = open_app(ckpt=NAME, text=TEXT)                                      # another session: its own pair
    assert "Languages: zho_Hans → eng_Latn" in _captions(other)
