"""What the pieces say about themselves: a bare word-start mark is found where SentencePiece emits one and
explained once on the Overview; a character the vocabulary lacks is named with the number of bytes it is read as."""
from __future__ import annotations

import pytest

from app_util import ROOT, open_app
from viz_transformer import load_checkpoint
from viz_transformer.analysis.piece_labels import bare_word_marks, byte_read_characters
from viz_transformer.core.tokenizer import WORD_START
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH as ZH_STRINGS

DEFAULT = ROOT / "checkpoints" / "zh-en-postnorm"


@pytest.fixture(scope="module")
def hm():
    return load_checkpoint(DEFAULT)


@pytest.mark.parametrize("text", ["今天天气很好。", "明天会下雨，记得带伞。", "我是一名工程师。", "他说 好。"])
def test_bare_marks_are_where_sentencepiece_emits_a_lone_word_start(hm, text):
    raw = hm.tokenizer.sp.encode(text, out_type=str)                    # SentencePiece's own pieces
    expect = [i for i, p in enumerate(raw) if p == WORD_START]
    run = hm.run(text)
    assert bare_word_marks(run.src_pieces) == expect


@pytest.mark.parametrize("text", ["这家餐厅的饺子很好吃。", "我吃了🍎和饺子。", "我是一名工程师。"])
def test_a_character_read_as_bytes_is_named_with_its_utf8_length(hm, text):
    vocab = {hm.tokenizer.sp.id_to_piece(i).lstrip(WORD_START) for i in range(hm.tokenizer.vocab_size)
             if not hm.tokenizer.sp.is_unused(i)}
    missing = [(ch, len(ch.encode("utf-8"))) for ch in text if ch not in vocab]
    assert byte_read_characters(hm.tokenizer.sp.encode(text, out_type=str)) == missing


@pytest.mark.parametrize("lang,table", [(None, EN), ("zh", ZH_STRINGS)])
def test_overview_explains_a_bare_mark_once_and_only_when_there_is_one(monkeypatch, lang, table):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    head = table["ov.bare_mark"].split("{pos}")[0]
    at = open_app(ckpt="zh-en-postnorm", text="今天天气很好。", lang=lang)
    notes = [c.value for c in at.caption if c.value.startswith(head)]
    assert len(notes) == 1 and notes[0].startswith(head + "0")
    at = open_app(ckpt="zh-en-postnorm", text="我是一名工程师。", lang=lang)
    assert not [c.value for c in at.caption if c.value.startswith(head)]
