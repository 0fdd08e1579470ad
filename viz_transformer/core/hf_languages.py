"""Language codes of the multilingual translators (mBART, M2M100, NLLB): which codes a folder's tokenizer holds,
where the source's code goes, and how the decoder starts, as transformers' tokenizers and generate() do.

    tok = language_tokenizer(folder, cfg, meta)          # the folder's own src_lang / tgt_lang, else zh -> en
    zh_en = tok.with_languages("zho_Hans", "eng_Latn")   # a new tokenizer; tok itself never changes

Conventions (transformers 5's tokenizers):
- M2M100Tokenizer (sentencepiece.bpe.model + vocab.json; codes "zh", "en", tokens __zh__, ids after vocab.json),
  NllbTokenizer (tokenizer.json; zho_Hans, eng_Latn) and MBart50Tokenizer (zh_CN, en_XX): the source is
  [src code] + pieces + [</s>]; the decoder starts from decoder_start_token_id (</s>) and then the target's code,
  which generate() forces as forced_bos_token_id.
- MBartTokenizer (mbart-large-cc25 and its fine-tunings, e.g. mbart-large-en-ro) and NLLB with
  legacy_behaviour: the source is pieces + [</s>, src code]; an MBartTokenizer folder's decoder starts from the
  target's code itself (generate(decoder_start_token_id=tgt code), as mbart-large-en-ro's config sets it).
A choice of languages is a new tokenizer (with_languages), never a change to one a server shares between users.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Iterable, Optional

from viz_transformer.core import checkpoint as ck

M2M100_CODES = {
    "m2m100": ("af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi hr "
               "ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or "
               "pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu").split(),
    "wmt21": "en ha is ja cs ru zh de".split()}
CODE = re.compile(r"^([a-z]{2}_[A-Z]{2}|[a-z]{3}_[A-Z][a-z]{3})$")       # zh_CN (mBART) | zho_Hans (NLLB)
ALIASES = {"zh": ("zh", "zh_CN", "zho_Hans"), "en": ("en", "en_XX", "eng_Latn")}
FAMILIES = ("mbart", "m2m_100")           # the model types whose folders may carry language codes
MAX_BYTES = 64 << 20                      # a tokenizer file's size limit (core.hf_tokenizer's)


class M2M100Pieces:
    """M2M100Tokenizer's own cutting: SentencePiece pieces mapped through vocab.json (an unknown piece: <unk>), the
    language tokens __xx__ numbered after vocab.json, in the order of tokenizer_config's language_codes list."""
    kind = "sentencepiece"

    def __init__(self, folder: Path, settings: dict):
        import sentencepiece as spm
        for name in ("sentencepiece.bpe.model", "vocab.json"):
            p = folder / name
            if not p.is_file():
                raise ck.CheckpointError(f"{folder} is missing {name} (M2M100's tokenizer)")
            if p.stat().st_size > MAX_BYTES:
                raise ck.CheckpointError(f"{p} has {p.stat().st_size:,} bytes; the limit is {MAX_BYTES:,}")
        vocab = ck.read_json(folder, "vocab.json")
        if "<unk>" not in vocab or not all(isinstance(v, int) for v in vocab.values()):
            raise ck.CheckpointError(f"{folder / 'vocab.json'} must map pieces to ids and hold <unk>")
        which = settings.get("language_codes", "m2m100")
        if which not in M2M100_CODES:
            raise ck.CheckpointError(f"{folder / 'tokenizer_config.json'}: language_codes {which!r} is not one of "
                                     f"{', '.join(M2M100_CODES)}")
        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(folder / "sentencepiece.bpe.model"))
        except (RuntimeError, OSError) as e:
            raise ck.CheckpointError(f"{folder / 'sentencepiece.bpe.model'} is not a SentencePiece model "
                                     f"({str(e)[:200]})") from None
        self.vocab = {k: int(v) for k, v in vocab.items()}
        self.codes = {c: len(vocab) + i for i, c in enumerate(M2M100_CODES[which])}
        self.inverse = {v: k for k, v in self.vocab.items()} | {i: f"__{c}__" for c, i in self.codes.items()}

    def body(self, text: str) -> list[int]:
        unk = self.vocab["<unk>"]
        return [self.vocab.get(p, unk) for p in self.sp.encode(text, out_type=str)]

    def raw_token(self, i: int) -> str:
        return self.inverse.get(int(i), "<unk>")

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.raw_token(i) for i in ids]

    def decode(self, ids: Iterable[int], specials: set) -> str:
        return self.sp.decode_pieces([self.raw_token(i) for i in ids if int(i) not in specials]).strip()


class LanguageTokenizer:
    """A multilingual translator's tokenizer with one source and one target language: encode() gives the encoder's
    ids with the source's code where the folder's tokenizer puts it; source_end (the ids after the text, kept when
    a long text is cut) and decoder_start (the decoder's prompt) are what core.encoding reads."""
    bans_specials = False

    def __init__(self, base, cfg, codes: dict[str, int], src: str, tgt: str, source: str, start: str, banned=()):
        """base: an HFTokenizer (tokenizer.json) or M2M100Pieces; codes: language code -> id; source: "prefix"
        ([code] + text + [</s>]) or "suffix" (text + [</s>, code]); start: "forced" (decoder start, then the target's
        code) or "code" (the target's code is the decoder's start)."""
        self.base, self.codes, self.source, self.start = base, dict(codes), source, start
        self.kind = base.kind
        self.pad_id, self.bos_id, self.eos_id = cfg.pad_id, cfg.bos_id, cfg.eos_id
        self.unk_id, self.sep_id = -1, -1
        self.banned = sorted(set(banned))
        self.specials = set(getattr(base, "specials", set())) | {cfg.pad_id, cfg.eos_id} | set(self.codes.values())
        self.src_lang, self.tgt_lang = self._check(src), self._check(tgt)

    def _check(self, code: str) -> str:
        if code not in self.codes:
            raise ValueError(f"{code!r} is not one of this model's language codes ({', '.join(list(self.codes)[:8])}"
                             f"{', …' if len(self.codes) > 8 else ''})")
        return code

    def with_languages(self, src: str, tgt: str) -> "LanguageTokenizer":
        """The same tokenizer reading src and writing tgt (ValueError for a code the folder lacks)."""
        new = copy.copy(self)
        new.src_lang, new.tgt_lang = self._check(src), self._check(tgt)
        return new

    @property
    def languages(self) -> tuple[str, str]:
        return self.src_lang, self.tgt_lang

    @property
    def source_end(self) -> tuple[int, ...]:
        return (self.eos_id,) if self.source == "prefix" else (self.eos_id, self.codes[self.src_lang])

    @property
    def decoder_start(self) -> tuple[int, ...]:
        code = self.codes[self.tgt_lang]
        return (self.bos_id, code) if self.start == "forced" else (code,)

    @property
    def vocab_size(self) -> int:
        return self.base.vocab_size if hasattr(self.base, "vocab_size") else len(self.base.inverse)

    def body(self, text: str) -> list[int]:
        b = self.base
        return b.body(text) if hasattr(b, "body") else list(b.backend.encode(text, add_special_tokens=False).ids)

    def encode(self, text: str) -> list[int]:
        head = [self.codes[self.src_lang]] if self.source == "prefix" else []
        return head + self.body(text) + list(self.source_end)

    def raw_token(self, i: int) -> str:
        return self.base.raw_token(i)

    def piece(self, i: int) -> str:
        return self.pieces([i])[0]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return self.base.pieces(ids)

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids if int(i) not in self.specials]
        return self.base.decode(ids, self.specials) if isinstance(self.base, M2M100Pieces) else self.base.decode(ids)


def folder_codes(base, settings: dict) -> dict[str, int]:
    """code -> id of the language codes a tokenizer.json holds (its special tokens shaped as zh_CN or zho_Hans)."""
    if isinstance(base, M2M100Pieces):
        return dict(base.codes)
    vocab = base.backend.get_vocab(with_added_tokens=True)
    return {t: vocab[t] for t in sorted(vocab, key=vocab.get) if CODE.match(t) and base.backend.token_to_id(t) in
            base.specials}


def default_languages(codes: Iterable[str], text: str = "", settings: Optional[dict] = None) -> tuple[str, str]:
    """(source, target) for a text: Chinese text (a Han character) Chinese -> English, other text English ->
    Chinese, when the model has both codes; else tokenizer_config's src_lang / tgt_lang, else its first two codes."""
    codes = list(codes)
    zh, en = (next((c for c in ALIASES[k] if c in codes), None) for k in ("zh", "en"))
    if zh and en:
        return (zh, en) if re.search(r"[\u4e00-\u9fff]", text or "") or not text else (en, zh)
    settings = settings or {}
    src = settings.get("src_lang") if settings.get("src_lang") in codes else codes[0]
    tgt = settings.get("tgt_lang") if settings.get("tgt_lang") in codes else codes[min(1, len(codes) - 1)]
    return src, tgt


def language_tokenizer(folder: Path, cfg, meta: dict, banned=(), base=None):
    """The tokenizer of an mbart or m2m_100 folder with language codes, as a LanguageTokenizer set to the folder's
    own src_lang / tgt_lang (else Chinese -> English); None when the folder's tokenizer holds no codes (an mBART
    used for one language). base: the folder's tokenizer.json tokenizer (HFTokenizer), when it has one."""
    folder = Path(folder)
    settings = ck.read_json(folder, "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    kind = str(settings.get("tokenizer_class") or "")
    if base is None:
        if meta.get("model_type") != "m2m_100" or kind not in ("", "M2M100Tokenizer"):
            return None
        base = M2M100Pieces(folder, settings)
    codes = folder_codes(base, settings)
    if not codes:
        return None
    suffix = kind == "MBartTokenizer" or (kind == "NllbTokenizer" and bool(settings.get("legacy_behaviour")))
    src, tgt = default_languages(codes, "", settings)
    if settings.get("src_lang") in codes and settings.get("tgt_lang") in codes:
        src, tgt = settings["src_lang"], settings["tgt_lang"]
    return LanguageTokenizer(base, cfg, codes, src, tgt, "suffix" if suffix else "prefix",
                             "code" if kind == "MBartTokenizer" else "forced", banned)

