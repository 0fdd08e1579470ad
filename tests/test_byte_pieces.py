"""core.byte_pieces against independent references: transformers' copy of GPT-2's bytes→unicode table, and a
byte-level BPE trained here with the `tokenizers` library (its own ByteLevel decoder decodes the groups)."""
from __future__ import annotations

import random
import re
import unicodedata

import pytest

from viz_transformer.core.byte_pieces import bytes_of_token, group_fragments, readable_pieces
from viz_transformer.core.tokenizer import group_words

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, pre_tokenizers, trainers  # noqa: E402

TRAIN = ["我是一名工程师。", "今天天气很好。", "我爱你。 I love you.", "I am an engineer.\nHello world!",
         "Emoji 😀👍 and 🎉 party", "他是我的朋友。", "We are going to Beijing tomorrow.", "这是我的书。\t好！"]
POOL = list("我是一名工程师今天气很好爱你他的朋友这书北京喜欢喝茶。，！？") + ["😀", "👍", "🎉", "é", "ß", "€"] + \
       list("abcdefghij XYZ.,!?'") + [" ", " ", "\n", "\t", "  "]
FIXED = ["我是一名工程师。", "我喜欢喝茶。 Tea!\n😀", "北京", " leading space", "a\n\nb", "€100 and 😀👍🎉",
         "Ünïcödé straße", "这是我的书。\t好！", "emoji at the end 🎉"]


@pytest.fixture(scope="module")
def bpe():
    """A byte-level BPE small enough (300 tokens) to split most Chinese characters and emoji over 2–3 tokens."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TRAIN * 20, trainer)
    return tok


def texts() -> list[str]:
    rng = random.Random(0)
    return FIXED + ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 30))) for _ in range(200)]


def test_table_is_gpt2s():
    bytes_to_unicode = pytest.importorskip("transformers.convert_slow_tokenizer").bytes_to_unicode
    ref = bytes_to_unicode()                                  # byte -> its stand-in character
    assert len(ref) == 256 and len(set(ref.values())) == 256
    for b, c in ref.items():
        assert bytes_of_token(c) == bytes([b])
    assert bytes_of_token("Ġthe") == b" the" and bytes_of_token("Ċ") == b"\n"
    assert bytes_of_token("".join(ref[b] for b in "我".encode())) == "我".encode()


def test_every_vocabulary_token_decodes_as_the_tokenizer_does(bpe):
    dec = decoders.ByteLevel()
    for token in bpe.get_vocab():
        text = dec.decode([token])
        if "\ufffd" not in text:                              # a whole-character token: its text is its bytes
            assert bytes_of_token(token) == text.encode("utf-8"), token


def test_not_byte_level():
    with pytest.raises(ValueError, match="not a byte-level BPE token"):
        bytes_of_token("我")
    assert readable_pieces(["Ġa", "[begin]", "b"]) == ["▁a", "[begin]", "b"]     # [ ] are in the table
    assert readable_pieces(["Ġa", "<my token>", "b"]) == ["▁a", "<my token>", "b"]   # a real space is not
    assert group_fragments(["Ġa", "<my token>", "b"]) == [[0], [1], [2]]


def test_hand_made_fragments():
    assert readable_pieces(["æĪ", "ĳ"]) == ["我(1/2)", "我(2/2)"]          # 我 = e6 88 91
    assert group_fragments(["æĪ", "ĳ"]) == [[0, 1]]
    # a token that ends 是 and starts 一 joins both characters' groups into one
    assert readable_pieces(["æĺ", "¯ä", "¸Ģ", "Ġok"]) == ["是(1/2)", "是(2/2)一(1/2)", "一(2/2)", "▁ok"]
    assert group_fragments(["æĺ", "¯ä", "¸Ģ", "Ġok"]) == [[0, 1, 2], [3]]
    assert readable_pieces(["Ċ", "ĉ", "Ġ", "ĠĠ", "Ā"]) == ["\\n", "\\t", "▁", "▁▁", "\\x00"]
    # a prompt cut inside a character starts with its last byte; a character cut at the end: bytes, never �
    assert readable_pieces(["ĳ", "æĺ¯", "æĪ"]) == ["<0x91>", "是", "<0xE6><0x88>"]


def test_groups_decode_to_whole_characters(bpe):
    dec = decoders.ByteLevel()
    n_split = 0
    for text in texts():
        enc = bpe.encode(text)
        tokens, ids = enc.tokens, enc.ids
        groups = group_fragments(tokens)
        assert [i for g in groups for i in g] == list(range(len(tokens)))
        raw = [b"".join(bytes_of_token(tokens[i]) for i in g) for g in groups]
        assert b"".join(raw) == text.encode("utf-8")
        for g, r in zip(groups, raw):
            assert r.decode("utf-8") == bpe.decode([ids[i] for i in g]) == dec.decode([tokens[i] for i in g])
            for k in range(1, len(g)):                       # minimal: no shorter head is whole characters
                with pytest.raises(UnicodeDecodeError):
                    b"".join(bytes_of_token(tokens[i]) for i in g[:k]).decode("utf-8")
            n_split += len(g) > 1
    assert n_split > 50                                       # the test really meets split characters


def test_labels_read_as_the_text(bpe):
    for text in texts():
        tokens = bpe.encode(text).tokens
        labels = readable_pieces(tokens)
        assert len(labels) == len(tokens)
        joined = "".join(labels)
        assert "\ufffd" not in joined
        for ch in text:
            if "CJK" in unicodedata.name(ch, "") or ord(ch) > 0xFFFF:     # Chinese characters and emoji
                assert ch in joined, (text, labels)
        for g in group_fragments(tokens):
            if len(g) == 1:                                   # a whole token reads as its text
                shown = bytes_of_token(tokens[g[0]]).decode("utf-8").replace(" ", "▁")
                shown = shown.replace("\n", "\\n").replace("\t", "\\t")
                assert labels[g[0]] == shown
        starts = {g[0] for g in group_words(labels)}          # the app's word grouping: a space starts a word
        assert all(i in starts for i, lab in enumerate(labels) if lab.startswith("▁") and lab.strip("▁")
                   and (i == 0 or labels[i - 1] != "▁"))


def test_split_character_is_named_on_every_fragment(bpe):
    """Every token of a split character names it, with parts 1..n on n consecutive tokens."""
    for text in texts():
        tokens = bpe.encode(text).tokens
        labels = readable_pieces(tokens)
        for g in group_fragments(tokens):
            parts = [(i, m.group(1), int(m.group(2)), int(m.group(3)))
                     for i in g for m in re.finditer(r"(.)\((\d)/(\d)\)", labels[i])]
            chars = set(bytes_of_token("".join(tokens[i] for i in g)).decode("utf-8"))
            if len(g) > 1:
                assert parts, labels
            for i, ch, k, n in parts:
                assert ch in chars and 1 <= k <= n <= 4
                if k < n:                                     # its next part is on the next token
                    assert (i + 1, ch, k + 1, n) in parts, (labels, g)
