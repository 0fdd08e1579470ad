"""A Hugging Face tokenizer.json read with the `tokenizers` library, behind our Tokenizer's interface.

encode gives exactly the ids the model's own Hugging Face tokenizer gives (its special tokens included, as
its post-processor adds them); pieces are what a person reads: byte-level BPE tokens (GPT-2, Qwen) are
turned back into text, and the fragments of one UTF-8 character are labelled so that Chinese never shows as
"�" (core.byte_pieces).
"""
from __future__ import annotations

import json
from pathlib import Path
import unicodedata
from typing import Iterable, Optional

from viz_transformer.core import checkpoint as ck
from viz_transformer.core.byte_pieces import WORD_START, readable_pieces
from viz_transformer.core.hf_languages import FAMILIES as LANGUAGE_FAMILIES, language_tokenizer

MAX_BYTES = 64 << 20


class HFTokenizer:
    bans_specials = False            # decoding may generate any id, as Hugging Face's generate does, except the
                                     # single-token bad_words_ids of generation_config.json (banned)

    def __init__(self, path: Path, cfg=None, banned=(), text: Optional[str] = None, special_names: dict = None):
        """path: a tokenizer.json (or, with `text`, the file the tokenizer.json text was built from);
        special_names: tokenizer_config.json's sep_token, cls_token, mask_token (an encoder's [SEP], [MASK])."""
        path = Path(path)
        if text is None and path.stat().st_size > MAX_BYTES:
            raise ck.CheckpointError(f"{path} has {path.stat().st_size:,} bytes; the limit is {MAX_BYTES:,}")
        from tokenizers import Tokenizer as Backend       # only when an imported model is opened
        try:
            text = path.read_text(encoding="utf-8") if text is None else text
            self.backend = Backend.from_str(text)
            spec = json.loads(text)
            # padding and truncation stored in the file (sentence-transformers writes a fixed 128) are ignored,
            # as transformers' tokenizers ignore them unless a call asks: a text is its own pieces, and one
            # longer than the model's limit is cut by encode_input / encode_encoder, which say so
            self.backend.no_padding()
            self.backend.no_truncation()
        except (ValueError, UnicodeDecodeError, Exception) as e:      # the Rust side raises its own Exception
            raise ck.CheckpointError(f"{path} is not a valid tokenizer.json ({str(e)[:200]})"
                                     f"{ck.pickle_note(path)}") from None
        self.byte_level = (spec.get("decoder") or {}).get("type") == "ByteLevel"
        model = str((spec.get("model") or {}).get("type", "BPE"))
        # what cuts a text into pieces, as the Overview names it: GPT-2 and Qwen byte-level BPE; Llama and
        # Mistral BPE over characters (SentencePiece's, byte fallback); a Unigram model is SentencePiece's
        self.kind = ("byte_bpe" if self.byte_level else "sentencepiece" if model == "Unigram"
                     else "wordpiece" if model == "WordPiece" else "bpe")
        self.continuing = str((spec.get("model") or {}).get("continuing_subword_prefix") or "##")
        specials = {t["id"] for t in spec.get("added_tokens") or [] if t.get("special")}
        self.specials = specials
        self.pad_id = cfg.pad_id if cfg is not None else -1
        self.bos_id = cfg.bos_id if cfg is not None else -1
        self.eos_id = cfg.eos_id if cfg is not None else -1
        self.unk_id, self.sep_id = -1, -1
        names = special_names or {}
        self.sep_token, self.mask_token = names.get("sep_token"), names.get("mask_token")
        self.mask_id = self.backend.token_to_id(self.mask_token) if self.mask_token else None
        self.banned = sorted(set(banned))

    def encode_pair(self, text: str, pair: Optional[str] = None) -> tuple[list[int], list[int]]:
        """(ids, segment ids) of a text, or of a sentence pair, as the tokenizer's post-processor builds them
        (BERT: [CLS] a [SEP] b [SEP], segments 0 then 1; RoBERTa: <s> a </s></s> b </s>, all 0)."""
        enc = self.backend.encode(text, pair) if pair is not None else self.backend.encode(text)
        return list(enc.ids), list(enc.type_ids)

    def split_pair(self, text: str) -> tuple[str, Optional[str]]:
        """"A [SEP] B" -> ("A", "B"): a typed separator (the tokenizer's sep_token) makes a sentence pair."""
        if self.sep_token and self.sep_token in text:
            a, b = text.split(self.sep_token, 1)
            if a.strip() and b.strip():
                return a.strip(), b.strip()
        return text, None

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return list(self.backend.encode(text).ids)

    def raw_token(self, i: int) -> str:
        t = self.backend.id_to_token(int(i))
        return t if t is not None else f"[{int(i)}]"

    def piece(self, i: int) -> str:
        return self.pieces([i])[0]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        ids = [int(i) for i in ids]
        raw = [self.raw_token(i) for i in ids]
        if self.kind == "wordpiece":
            return wordpiece_pieces(raw, [i in self.specials for i in ids], self.continuing)
        if not self.byte_level:
            return raw
        return readable_pieces(raw)

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=True)


def wordpiece_pieces(raw: list[str], special: list[bool], continuing: str = "##") -> list[str]:
    """WordPiece tokens written as SentencePiece writes pieces, so words group the same way (core.tokenizer
    .group_words): a word's first piece gets ▁ ("▁un"), a continuation loses its "##" ("aff"); special tokens
    and punctuation (always a word of its own in BERT's pre-tokenizer) stay as they are."""
    out = []
    for p, sp in zip(raw, special):
        if sp:
            out.append(p)
        elif p.startswith(continuing) and len(p) > len(continuing):
            out.append(p[len(continuing):])
        elif all(unicodedata.category(c).startswith("P") for c in p):
            out.append(p)
        else:
            out.append(WORD_START + p)
    return out


class MarianTokenizer:
    """Marian's tokenizer (opus-mt), as Hugging Face's MarianTokenizer without sacremoses (no punctuation
    normalisation): SentencePiece source.spm cuts the source into pieces, vocab.json maps each piece to its id
    (not SentencePiece's own ids; an unknown piece is <unk>), and </s> ends it; a leading language code such
    as >>fr<< is kept whole. A target text is cut by target.spm. One shared vocabulary (decoded through
    source.spm, as Hugging Face does), or, when tokenizer_config.json says separate_vocabs, a target vocabulary
    of its own: target_vocab.json, whose pieces the decoder's ids are and which target.spm decodes."""
    bans_specials = False
    kind = "sentencepiece"

    def __init__(self, folder: Path, cfg=None, banned=()):
        import sentencepiece as spm
        folder = Path(folder)
        self.separate = bool(_json(folder, "tokenizer_config.json", required=False).get("separate_vocabs", False))
        names = ("source.spm", "vocab.json") + (("target.spm", "target_vocab.json") if self.separate else ())
        for name in names + (("target.spm",) if (folder / "target.spm").exists() else ()):
            _check_file(folder, name)
        self.vocab = _vocab(folder, "vocab.json")
        self.tgt_vocab = _vocab(folder, "target_vocab.json") if self.separate else self.vocab
        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(folder / "source.spm"))
            target = folder / "target.spm"
            self.tgt_sp = spm.SentencePieceProcessor(model_file=str(target)) if target.is_file() else self.sp
        except (RuntimeError, OSError) as e:
            raise ck.CheckpointError(f"{folder}: Marian's SentencePiece models are not valid ({str(e)[:200]})") from None
        self.src_inverse = {int(v): k for k, v in self.vocab.items()}
        self.inverse = {int(v): k for k, v in self.tgt_vocab.items()}
        self.unk_id = int(self.tgt_vocab["<unk>"])
        self.pad_id = cfg.pad_id if cfg is not None else int(self.tgt_vocab.get("<pad>", -1))
        self.eos_id = cfg.eos_id if cfg is not None else int(self.tgt_vocab.get("</s>", 0))
        self.bos_id, self.sep_id = (cfg.bos_id if cfg is not None else self.pad_id), -1
        self.specials = {i for i in (self.pad_id, self.eos_id, self.unk_id) if i >= 0}
        self.banned = sorted(set(banned))

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _ids(self, text: str, sp, vocab: dict) -> list[int]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[: end + 2]], text[end + 2:]
        unk = int(vocab["<unk>"])
        return [int(vocab.get(p, unk)) for p in code + sp.encode(text, out_type=str)] + [self.eos_id]

    def encode(self, text: str) -> list[int]:
        """The source's ids (what the encoder reads), </s> last."""
        return self._ids(text, self.sp, self.vocab)

    def encode_target(self, text: str) -> list[int]:
        """A target text's ids (Hugging Face's text_target): target.spm, the target vocabulary, </s> last."""
        return self._ids(text, self.tgt_sp, self.tgt_vocab)

    def piece(self, i: int) -> str:
        """A decoder id's piece (the target vocabulary's)."""
        return self.inverse.get(int(i), "<unk>")

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def src_pieces(self, ids: Iterable[int]) -> list[str]:
        """An encoder id's pieces (the source vocabulary's)."""
        return [self.src_inverse.get(int(i), "<unk>") for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        pieces = [self.piece(i) for i in ids if int(i) not in self.specials]
        sp = self.tgt_sp if self.separate else self.sp
        return sp.decode_pieces(pieces).replace("\u2581", " ").strip()


def _check_file(folder: Path, name: str) -> None:
    p = folder / name
    if not p.is_file():
        raise ck.CheckpointError(f"{folder} is missing {name} (Marian's tokenizer)")
    if p.stat().st_size > MAX_BYTES:
        raise ck.CheckpointError(f"{p} has {p.stat().st_size:,} bytes; the limit is {MAX_BYTES:,}")


def _json(folder: Path, name: str, required: bool = True) -> dict:
    p = folder / name
    if not required and not p.is_file():
        return {}
    _check_file(folder, name)
    try:
        value = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ck.CheckpointError(f"{p} is not valid JSON ({str(e)[:200]})") from None
    if not isinstance(value, dict):
        raise ck.CheckpointError(f"{p} must hold a JSON object")
    return value


def _vocab(folder: Path, name: str) -> dict:
    vocab = _json(folder, name)
    if "<unk>" not in vocab or not all(isinstance(v, int) for v in vocab.values()):
        raise ck.CheckpointError(f"{folder / name} must map pieces to ids and hold <unk>")
    return vocab


def _special_names(folder: Path) -> dict:
    """tokenizer_config.json's sep_token, cls_token and mask_token as strings (a token may be written as
    {"content": ...}); {} without the file."""
    cfg = ck.read_json(folder, "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    out = {}
    for k in ("sep_token", "cls_token", "mask_token", "unk_token", "pad_token"):
        v = cfg.get(k)
        v = v.get("content") if isinstance(v, dict) else v
        if isinstance(v, str) and v:
            out[k] = v
    out["do_lower_case"] = cfg.get("do_lower_case", True)
    out["strip_accents"] = cfg.get("strip_accents")
    out["tokenize_chinese_chars"] = cfg.get("tokenize_chinese_chars", True)
    return out


def wordpiece_tokenizer(folder: Path, cfg, names: dict) -> HFTokenizer:
    """BERT's tokenizer from vocab.txt alone (no tokenizer.json), made as transformers' BertTokenizer makes it:
    the lower-casing, accent and Chinese-character settings of tokenizer_config.json, [CLS] a [SEP] (b [SEP])."""
    path = folder / "vocab.txt"
    _check_file(folder, "vocab.txt")
    from tokenizers.implementations import BertWordPieceTokenizer
    specials = {k: names.get(k, d) for k, d in (("unk_token", "[UNK]"), ("sep_token", "[SEP]"),
                                                  ("cls_token", "[CLS]"), ("pad_token", "[PAD]"),
                                                  ("mask_token", "[MASK]"))}
    try:
        tok = BertWordPieceTokenizer(str(path), **specials, lowercase=bool(names.get("do_lower_case", True)),
                                     strip_accents=names.get("strip_accents"),
                                     handle_chinese_chars=bool(names.get("tokenize_chinese_chars", True)))
    except Exception as e:                                   # the Rust side raises its own Exception
        raise ck.CheckpointError(f"{path} is not a valid WordPiece vocabulary ({str(e)[:200]})") from None
    missing = [t for t in specials.values() if tok.token_to_id(t) is None]
    if missing:
        raise ck.CheckpointError(f"{path} lacks the special tokens {', '.join(missing)}")
    return HFTokenizer(path, cfg, (), text=tok._tokenizer.to_str(), special_names={**specials, **names})


def hf_tokenizer(folder: Path, cfg, meta: dict):
    """The tokenizer of an imported model: Marian's files, else tokenizer.json (or BERT's vocab.txt); the
    generation config's single-token bad_words_ids are never generated."""
    bad = (meta.get("generation_config") or {}).get("bad_words_ids") or []
    banned = [int(w[0]) for w in bad if isinstance(w, list) and len(w) == 1]
    if meta.get("model_type") == "marian":
        return MarianTokenizer(folder, cfg, banned)
    folder = Path(folder)
    if meta.get("model_type") in LANGUAGE_FAMILIES:         # mBART, M2M100, NLLB: language codes
        base = HFTokenizer(folder / "tokenizer.json", cfg, banned, special_names=_special_names(folder)) \
            if (folder / "tokenizer.json").is_file() else None
        tok = language_tokenizer(folder, cfg, meta, banned, base)
        if tok is not None or base is not None:
            return tok or base
    path = folder / "tokenizer.json"
    names = _special_names(folder)
    if not path.is_file():
        if (folder / "vocab.txt").is_file() and cfg is not None and cfg.is_encoder_only:
            return wordpiece_tokenizer(folder, cfg, names)
        if (folder / "spiece.model").is_file() and meta.get("model_type") in ("t5", "mt5"):     # T5's SentencePiece
            from viz_transformer.core.hf_t5 import spiece_json
            _check_file(folder, "spiece.model")
            extra = ck.read_json(folder, "tokenizer_config.json").get("extra_ids", 100) \
                if (folder / "tokenizer_config.json").is_file() else 100
            return HFTokenizer(folder / "spiece.model", cfg, banned, text=spiece_json(folder / "spiece.model", int(extra)),
                               special_names=names)
        raise ck.CheckpointError(f"{folder} has no tokenizer.json")
    return HFTokenizer(path, cfg, banned, special_names=names)
