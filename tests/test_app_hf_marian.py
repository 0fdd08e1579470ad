"""The attention and decoding pages through AppTest on an imported Marian translator whose source and target
vocabularies are separate (tests/hf_util.py): source axes show the source vocabulary's pieces, target axes the
target's, as the checkpoint run directly gives them; beam search starts from the folder's num_beams."""
from __future__ import annotations

import html

import pytest

import hf_util as H
from app_util import by_key, figure, open_app
from viz_transformer import decode, DecodeSettings, load_checkpoint

pytestmark = pytest.mark.slow          # transformers builds the model folder

NAME = "marian-separate-vocabs"
TEXT = H.MARIAN_SRC[0]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-checkpoints")
    H.build_marian(H.MARIAN_BY_ID[NAME], root / NAME)
    return root


def test_attention_page_labels_each_side_with_its_own_pieces(env):
    hm = load_checkpoint(env / NAME)
    run = hm.run(TEXT)
    assert run.src_pieces == hm.tokenizer.src_pieces(hm.tokenizer.encode(TEXT))
    assert run.src_pieces != hm.tokenizer.pieces(hm.tokenizer.encode(TEXT))    # the vocabularies really differ
    at = open_app("viz_explorer/pages/look/attention.py", ckpt=NAME, text=TEXT)
    f = figure(at, "encoder self-attention, layer 0, head 0")
    assert f["data"][0]["x"] == [html.escape(f"{i}:{p}", quote=False) for i, p in enumerate(run.src_pieces)]
    by_key(at.selectbox, "at_block").set_value("decoder.cross_attn")
    at.run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    f = figure(at, "cross-attention (decoder → encoder), layer 0, head 0")
    assert f["data"][0]["x"] == [html.escape(f"{i}:{p}", quote=False) for i, p in enumerate(run.src_pieces)]
    assert len(f["data"][0]["y"]) == len(run.tgt_pieces)


def test_decoding_page_beam_search_with_the_generation_config(env):
    hm = load_checkpoint(env / NAME)
    at = open_app("viz_explorer/pages/step/decoding.py", ckpt=NAME, text=TEXT)
    by_key(at.button_group, "dc_strategy").set_value("beam").run(timeout=60)
    assert by_key(at.slider, "dc_width").value == hm.cfg.num_beams == 4
    ref = decode(hm, TEXT, DecodeSettings("beam", beam_width=4, max_new_tokens=20))
    for _ in range(len(ref.steps)):
        at.button(key="dc_next").click().run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    assert " ".join(s.piece for s in ref.steps) in at.text[0].value          # the target's pieces
    assert len(figure(at, "Cross-attention of the newest query")["data"][0]["x"]) == len(ref.src_pieces)
