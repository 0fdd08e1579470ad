"""A Hugging Face tokenizer.json read with the `tokenizers` library, behind our Tokenizer's interface.

encode gives exactly the ids the model's own Hugging Face tokenizer gives (its special tokens included, as
its post-processor adds them); pieces are what a person reads: byte-level BPE tokens (GPT-2, Qwen) are
turned back into text, and the fragments of one UTF-8 character are labelled so that Chinese never shows as
"�" (core.byte_pieces).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer as Backend

from viz_transformer.core import checkpoint as ck

MAX_BYTES = 64 << 20


class HFTokenizer:
    bans_specials = False            # decoding may generate any id, as Hugging Face's generate does

    def __init__(self, path: Path, cfg=None):
        path = Path(path)
        if path.stat().st_size > MAX_BYTES:
            raise ck.CheckpointError(f"{path} has {path.stat().st_size:,} bytes; the limit is {MAX_BYTES:,}")
        try:
            text = path.read_text(encoding="utf-8")
            self.backend = Backend.from_str(text)
            spec = json.loads(text)
        except (ValueError, UnicodeDecodeError, Exception) as e:      # the Rust side raises its own Exception
            raise ck.CheckpointError(f"{path} is not a valid tokenizer.json ({str(e)[:200]}){ck._sniff(path)}") from None
        self.byte_level = (spec.get("decoder") or {}).get("type") == "ByteLevel"
        specials = {t["id"] for t in spec.get("added_tokens") or [] if t.get("special")}
        self.specials = specials
        self.pad_id = cfg.pad_id if cfg is not None else -1
        self.bos_id = cfg.bos_id if cfg is not None else -1
        self.eos_id = cfg.eos_id if cfg is not None else -1
        self.unk_id, self.sep_id = -1, -1

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
        raw = [self.raw_token(i) for i in ids]
        if not self.byte_level:
            return raw
        try:
            from viz_transformer.core.byte_pieces import readable_pieces
        except ImportError:                      # TODO(merge): byte_pieces lands with the sinks branch
            return raw
        return readable_pieces(raw)

    def decode(self, ids: Iterable[int]) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=True)
