"""The SentencePiece wrapper: byte fallback loses nothing, special tokens, and grouping pieces
into words (expected groups written by hand)."""
from __future__ import annotations

import unicodedata

import pytest

from viz_transformer.core.tokenizer import BOS, EOS, PAD, UNK, Tokenizer, group_words, word_labels


@pytest.fixture(scope="module")
def tok(tiny_translator) -> Tokenizer:
    return tiny_translator.tokenizer


@pytest.mark.parametrize("text", ["I love you 😀!", "龘靐齉 are rare", "naïve café, résumé", "∑ x² ≠ ∞ → ✓",
                                  "Ελληνικά и русский", "我爱你。🐉", "tab\tand  double  space"])
def test_byte_fallback_round_trips_without_unk(tok, text):
    ids = tok.encode(text)
    assert tok.unk_id not in ids
    # SentencePiece's default normalizer (nmt_nfkc) applies NFKC (x² -> x2) and folds whitespace runs
    assert tok.decode(ids) == " ".join(unicodedata.normalize("NFKC", text).split())
    raw, shown = [tok.sp.id_to_piece(i) for i in ids], tok.pieces(ids)
    assert not any(p.startswith("<0x") for p in shown)         # every byte run spells whole characters
    for r, s in zip(raw, shown):
        if r.startswith("<0x"):         # its label names a character whose UTF-8 bytes hold this byte
            assert r[3:5].lower() in s.split("(")[0].encode("utf-8").hex()


def test_special_tokens(tok):
    assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id) == (0, 1, 2, 3)
    assert tok.pieces([0, 1, 2, 3]) == [PAD, UNK, BOS, EOS]
    ids = tok.encode("我爱你。")
    assert tok.decode([tok.bos_id] + ids + [tok.eos_id, tok.pad_id, tok.pad_id]) == "我爱你。"


def test_save_and_load_give_the_same_tokenizer(tok, tmp_path):
    tok.save(tmp_path / "t.model")
    again = Tokenizer.load(tmp_path / "t.model")
    assert again.vocab_size == tok.vocab_size
    for text in ("我是一名工程师。", "The cat sat on the mat."):
        assert again.encode(text) == tok.encode(text)


W = "\u2581"   # ▁

GROUPS = [
    # English: a word starts at ▁; punctuation is a word of its own
    ([W + "I", W + "am", W + "an", W + "engine", "er", "."], [[0], [1], [2], [3, 4], [5]]),
    ([W, "I", W + "Hel", "lo", ",", W + "world", "!"], [[0, 1], [2, 3], [4], [5], [6]]),
    # Chinese: every CJK piece is a word (multi-character pieces stay one word)
    ([W + "我", "是", "工程", "师", "。"], [[0], [1], [2], [3], [4]]),
    # special tokens stand alone
    ([BOS, W + "I", W + "like", "s", EOS, PAD], [[0], [1], [2, 3], [4], [5]]),
    ([BOS, "我", "爱", "你", EOS], [[0], [1], [2], [3], [4]]),
    # byte fallback: the bytes of one character stay together, with a ▁ just before them
    ([W, "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", W + "ok"], [[0, 1, 2, 3, 4], [5]]),
    ([W + "我", "<0xE9>", "<0xBE>", "<0x98>", "你"], [[0], [1, 2, 3], [4]]),                 # 龘 inside Chinese
    (["<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "a"], [[0, 1, 2, 3], [4]]),                  # emoji is a word
    # an accented letter inside a word belongs to that word
    ([W + "caf", "<0xC3>", "<0xA9>", W + "ok"], [[0, 1, 2], [3]]),
    ([W + "na", "<0xC3>", "<0xAF>", "ve"], [[0, 1, 2, 3]]),
    # a byte-fallback punctuation mark is a word of its own
    ([W + "hi", "<0x21>"], [[0], [1]]),
    # a bare ▁ is the space before the next piece, even before punctuation or a CJK character
    ([W + "said", W, "'", "h", "i", "'", "."], [[0], [1, 2], [3, 4], [5], [6]]),
    ([W + "ok", W, "我", W, BOS], [[0], [1, 2], [3], [4]]),
    ([], []),
]


@pytest.mark.parametrize("pieces,groups", GROUPS)
def test_group_words(pieces, groups):
    assert group_words(pieces) == groups


def test_group_words_covers_every_position_once(tok):
    for text in ("我是一名工程师。", "I am an engineer.", "café 😀 naïve", "我爱你 🐉 龘"):
        pieces = tok.pieces([tok.bos_id] + tok.encode(text) + [tok.eos_id])
        flat = [i for g in group_words(pieces) for i in g]
        assert flat == list(range(len(pieces)))


def test_word_labels():
    pieces = [BOS, W + "Hel", "lo", ",", W + "wor", "ld", W]
    assert word_labels(pieces, group_words(pieces)) == [BOS, "Hello", ",", "world", W]


def test_contractions_and_decimals_stay_one_word_on_the_shipped_tokenizer():
    from conftest import ROOT
    tok = Tokenizer.load(ROOT / "checkpoints" / "zh-en" / "tokenizer.model")
    # the reference is the text itself: words are its whitespace-separated parts, with
    # sentence-final punctuation split off
    for text, words in [("I'm an engineer.", ["I'm", "an", "engineer", "."]),
                        ("It is 3.14.", ["It", "is", "3.14", "."]),
                        ("1,000 people", ["1,000", "people"]),
                        ("Tom's book, isn't it?", ["Tom's", "book", ",", "isn't", "it", "?"])]:
        pieces = tok.pieces(tok.encode(text))
        assert word_labels(pieces, group_words(pieces)) == words, pieces
    pieces = tok.pieces(tok.encode("我是学生。"))
    assert word_labels(pieces, group_words(pieces))[-1] == "。"


def test_a_bare_space_piece_is_never_a_word_on_the_shipped_tokenizer():
    from conftest import ROOT
    tok = Tokenizer.load(ROOT / "checkpoints" / "zh-en" / "tokenizer.model")
    # reference: the text's own words, quotes and brackets split off as punctuation
    for text, words in [("He said 'hi'.", ["He", "said", "'", "hi", "'", "."]),
                        ("(1.5)", ["(", "1.5", ")"])]:
        pieces = tok.pieces(tok.encode(text))
        assert W in pieces                                   # the case under test: a bare ▁ piece
        assert word_labels(pieces, group_words(pieces)) == words, pieces
