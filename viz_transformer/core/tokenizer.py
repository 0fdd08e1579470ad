"""SentencePiece tokenizer: ids, pieces, special tokens, training, and grouping pieces into words.

Trained with byte_fallback, so no input character is ever lost to [unk].
"""
from __future__ import annotations

import io
import unicodedata
from pathlib import Path
from typing import Iterable

import sentencepiece as spm

from viz_transformer.core.byte_pieces import (continues_character, readable_pieces, sentencepiece_bytes,
                                              without_fragment_marks)

PAD, UNK, BOS, EOS = "[pad]", "[unk]", "[begin]", "[end]"
SEP = "[sep]"   # a control piece (never matched in text): between source and target in one sequence
# a masked LM's pieces (BERT's names): [CLS] and [SEP] in the places of [begin] and [end], and [MASK], the one
# piece a typed text can name (a user-defined piece: SentencePiece matches it in text)
BERT_PAD, BERT_UNK, CLS, BERT_SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_PIECES = (PAD, UNK, BOS, EOS, BERT_PAD, BERT_UNK, CLS, BERT_SEP, MASK)
WORD_START = "\u2581"  # ▁, SentencePiece's marker for "a space came before this piece"


class Tokenizer:
    def __init__(self, model_proto: bytes):
        self.sp = spm.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(model_proto)
        self.model_proto = model_proto
        self.pad_id, self.unk_id = self.sp.pad_id(), self.sp.unk_id()
        self.bos_id, self.eos_id = self.sp.bos_id(), self.sp.eos_id()
        sep = self.sp.piece_to_id(SEP)
        self.sep_id = sep if self.sp.id_to_piece(sep) == SEP else -1      # -1: trained without [sep]
        self.specials = {self.pad_id, self.unk_id, self.bos_id, self.eos_id} | ({self.sep_id} - {-1})
        mask = self.sp.piece_to_id(MASK)
        self.mask_id = mask if self.sp.id_to_piece(mask) == MASK else None          # None: trained without it
        self.mask_token = MASK if self.mask_id is not None else None
        self.sep_token = BERT_SEP if self.mask_id is not None and self.sp.id_to_piece(self.eos_id) == BERT_SEP else None
        if self.mask_id is not None:
            self.specials.add(self.mask_id)

    @classmethod
    def load(cls, path) -> "Tokenizer":
        return cls(Path(path).read_bytes())

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        ids = self.sp.encode(text, out_type=int)
        if self.mask_id is None or self.mask_id not in ids:
            return ids
        # a [MASK] takes the space before it, as BERT's tokenizers strip it: "the [MASK]." reads as the masked
        # training text "▁the <▁mat> ." does, never with a lone ▁ piece in front of the blank
        space = self.sp.piece_to_id(WORD_START)
        return [x for i, x in enumerate(ids) if not (x == space and i + 1 < len(ids) and ids[i + 1] == self.mask_id)]

    def encode_pair(self, text: str, pair=None) -> tuple[list[int], list[int]]:
        """(ids, segment ids) of an encoder's input: [CLS] text [SEP], or [CLS] text [SEP] pair [SEP] with the
        pair's pieces in segment 1 (a masked LM's tokenizer names [begin] and [end] [CLS] and [SEP])."""
        a = [self.bos_id] + self.encode(text) + [self.eos_id]
        b = self.encode(pair) + [self.eos_id] if pair is not None else []
        return a + b, [0] * len(a) + [1] * len(b)

    def split_pair(self, text: str):
        """"A [SEP] B" -> ("A", "B") for a masked LM's tokenizer; otherwise (text, None)."""
        if self.sep_token and self.sep_token in text:
            a, b = text.split(self.sep_token, 1)
            if a.strip() and b.strip():
                return a.strip(), b.strip()
        return text, None

    def piece(self, i: int) -> str:
        return self.pieces([i])[0]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """The pieces as the app shows them (display_pieces): byte-fallback runs as their characters."""
        return display_pieces([self.sp.id_to_piece(int(i)) for i in ids])

    def decode(self, ids: Iterable[int]) -> str:
        return self.sp.decode([int(i) for i in ids if int(i) not in self.specials])

    def save(self, path) -> None:
        Path(path).write_bytes(self.model_proto)

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int, model_type: str = "unigram",
              character_coverage: float = 0.9995, seed_sentences: int = 1_000_000, sep: bool = False,
              masked_lm: bool = False, **extra) -> "Tokenizer":
        """Train on an iterable of sentences; sep=True adds the [sep] control piece (id 4); masked_lm=True names
        the specials as BERT does ([PAD] [UNK] [CLS] [SEP]) and adds [MASK] (id 4); `extra` goes to
        SentencePieceTrainer as is."""
        if sep:
            extra = dict(extra, control_symbols=[SEP])
        names = (BERT_PAD, BERT_UNK, CLS, BERT_SEP) if masked_lm else (PAD, UNK, BOS, EOS)
        if masked_lm:
            extra = dict(extra, user_defined_symbols=[MASK])
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=buf, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage, byte_fallback=True,
            pad_id=0, unk_id=1, bos_id=2, eos_id=3,
            pad_piece=names[0], unk_piece=names[1], bos_piece=names[2], eos_piece=names[3],
            input_sentence_size=seed_sentences, shuffle_input_sentence=True,
            max_sentence_length=8192, minloglevel=2, num_threads=2, **extra)
        return cls(buf.getvalue())


def is_cjk(ch: str) -> bool:
    """A Han, kana or Hangul character, or a full-width sign: the scripts written without spaces."""
    return "CJK" in unicodedata.name(ch, "") or unicodedata.east_asian_width(ch) in ("W", "F")


def one_piece_per_cjk_character(model_proto: bytes) -> bytes:
    """The same SentencePiece model with every piece that holds a CJK character and anything else
    (工程师, 我是一名, ▁今天, 3月) marked UNUSED: SentencePiece never emits an unused piece, so Chinese is cut
    into single characters and no piece can glue two words together; ids and the vocabulary size stay."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    m.ParseFromString(model_proto)
    for p in m.pieces:
        body = p.piece.lstrip(WORD_START)
        if p.type == pb.ModelProto.SentencePiece.NORMAL and len(body) > 1 and any(map(is_cjk, body)):
            p.type = pb.ModelProto.SentencePiece.UNUSED
    return m.SerializeToString()


def display_pieces(raw: list[str]) -> list[str]:
    """SentencePiece pieces as a person reads them, one label per piece: a byte-fallback run that spells one
    character shows that character on each of its pieces (🍎(1/4) … 🍎(4/4), as byte-level BPE tokens do:
    byte_pieces.readable_pieces), and the word mark ▁ is dropped before a CJK character unless a Latin letter
    or digit comes right before it: Chinese has no spaces, so there it marks only where the text began."""
    out = readable_pieces(raw, sentencepiece_bytes)
    for i, p in enumerate(out):
        if len(p) > 1 and p[0] == WORD_START and is_cjk(p[1]) \
                and not (i and out[i - 1] and out[i - 1][-1].isascii() and out[i - 1][-1].isalnum()):
            out[i] = p[1:]
    return out


def source_pieces(tok, ids: Iterable[int]) -> list[str]:
    """The pieces of a text's own ids (an encoder's input): the source vocabulary's, for a translator whose
    source and target vocabularies are separate (its tokenizer has src_pieces); else tok.pieces."""
    return tok.src_pieces(ids) if hasattr(tok, "src_pieces") else tok.pieces(ids)


def encode_target(tok, text: str) -> list[int]:
    """A target text's ids (a forced output): the target vocabulary's when it is separate, else tok.encode."""
    return tok.encode_target(text) if hasattr(tok, "encode_target") else tok.encode(text)


def _is_cjk_or_punct(piece: str) -> bool:
    body = piece.lstrip(WORD_START)
    if not body:
        return False
    ch = body[0]
    return unicodedata.category(ch).startswith("P") or is_cjk(ch)


INWORD_PUNCT = "'’.,-"    # joins two letters or digits with no space: I'm, don't, 3.14, 1,000, U.S, well-known


def _latin_alnum(ch: str) -> bool:
    return ch.isalnum() and not _is_cjk_or_punct(ch)


def _inside_word(pieces: list[str], i: int) -> bool:
    """A punctuation piece that sits between letters/digits of one word (no ▁ on either side)."""
    p = pieces[i]
    if i == 0 or p.startswith(WORD_START) or p[0] not in INWORD_PUNCT:
        return False
    prev = pieces[i - 1]
    if prev in SPECIAL_PIECES or not _latin_alnum(prev[-1]):
        return False
    rest = p.lstrip(INWORD_PUNCT)
    if rest:
        return _latin_alnum(rest[0])
    nxt = pieces[i + 1] if i + 1 < len(pieces) else ""
    return bool(nxt) and not nxt.startswith(WORD_START) and _latin_alnum(nxt[0])


def _byte_value(piece: str):
    b = sentencepiece_bytes(piece)
    return b[0] if b else None


def _byte_char(pieces: list[str], i: int) -> str:
    """The character whose UTF-8 encoding starts with the byte piece at i ("" if invalid)."""
    raw = bytearray([_byte_value(pieces[i])])
    for p in pieces[i + 1:]:
        b = _byte_value(p)
        if b is None or not 0x80 <= b < 0xC0:
            break
        raw.append(b)
    return raw.decode("utf-8", errors="ignore")[:1]


def group_words(pieces: list[str]) -> list[list[int]]:
    """Group piece positions into words: a word starts at ▁, at a special token, and at every
    CJK character or punctuation piece (Chinese has no spaces, so its pieces are its words), except
    punctuation inside a word (I'm, don't, 3.14, 1,000 stay one word). A bare ▁ piece belongs to the
    word after it (the space before "'hi'" is not a word). Byte-fallback pieces of one character stay together."""
    groups: list[list[int]] = []
    prev_standalone = True
    for i, p in enumerate(pieces):
        if groups and continues_character(p):            # 🍎(2/4): the rest of a character split over pieces
            groups[-1].append(i)
            continue
        b = _byte_value(p)
        if b is not None:
            if 0x80 <= b < 0xC0 and i > 0 and _byte_value(pieces[i - 1]) is not None:
                groups[-1].append(i)                     # continuation byte of the same character
                continue
            standalone = _is_cjk_or_punct(_byte_char(pieces, i))   # é in "café" stays in its word
            if groups and (pieces[i - 1] == WORD_START or not (standalone or prev_standalone)):
                groups[-1].append(i)
            else:
                groups.append([i])
            prev_standalone = standalone
            continue
        special = p in SPECIAL_PIECES
        standalone = special or (_is_cjk_or_punct(p) and not _inside_word(pieces, i))
        after_space = i > 0 and pieces[i - 1] == WORD_START and not special    # a bare ▁ is this piece's space
        if not groups or p.startswith(WORD_START) or ((standalone or prev_standalone) and not after_space):
            groups.append([i])
        else:
            groups[-1].append(i)
        prev_standalone = standalone
    return groups


def word_labels(pieces: list[str], groups: list[list[int]]) -> list[str]:
    """A readable label per word: its pieces joined, ▁ removed, a split character written once."""
    return [without_fragment_marks("".join(pieces[i] for i in g).replace(WORD_START, "")) or WORD_START
            for g in groups]
