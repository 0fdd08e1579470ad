"""Chinese is cut one character a piece: no piece of the shipped translators glues two words together, on
every sentence the app offers (the sidebar's examples, the lessons, the tutorials' walk-through)."""
from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from viz_transformer.core.checkpoint_files import load_tokenizer, read_config_json
from viz_transformer.core.tokenizer import WORD_START, Tokenizer, is_cjk, one_piece_per_cjk_character
from viz_explorer.server.defaults import EXAMPLES, SECOND

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = "我是一名工程师"                  # the tutorials' walk-through, as they write it (no full stop)


def _lesson_texts() -> list[str]:
    found = []

    def walk(x, key=""):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, k)
        elif isinstance(x, list):
            for v in x:
                walk(v, key)
        elif isinstance(x, str) and key in ("text", "other_text", "other") and any(map(is_cjk, x)):
            found.append(x)
    for f in sorted((ROOT / "lessons").glob("*.json")):
        walk(json.loads(f.read_text(encoding="utf-8")))
    return found


SENTENCES = sorted(set(EXAMPLES["translator"] + SECOND["translator"] + _lesson_texts() + [TUTORIAL]))
TRANSLATORS = [d.name for d in sorted((ROOT / "checkpoints").iterdir())
               if (d / "config.json").is_file() and read_config_json(d).is_translator]
ONE_CHARACTER = [n for n in TRANSLATORS           # trained on one-character pieces (`train --cjk-chars`)
                 if json.loads((ROOT / "checkpoints" / n / "meta.json").read_text("utf-8"))
                 .get("train_config", {}).get("cjk_chars")]


def _cjk_chars(text: str) -> list[str]:
    return [c for c in unicodedata.normalize("NFKC", text) if is_cjk(c)]


def test_the_sentences_are_found():
    assert TUTORIAL in SENTENCES and "我爱你。" in SENTENCES and len(_lesson_texts()) >= 2
    assert {"zh-en", "zh-en-decoder", "zh-en-prefix", "zh-en-postnorm"} <= set(TRANSLATORS)
    assert "zh-en" in ONE_CHARACTER                  # the default model, the tutorials' walk-through


@pytest.mark.parametrize("name", ONE_CHARACTER)
def test_every_chinese_piece_is_one_character(name):
    tok = load_tokenizer(ROOT / "checkpoints" / name)
    for text in SENTENCES:
        raw = [tok.sp.id_to_piece(i) for i in tok.encode(text)]
        cjk = [p for p in raw if any(map(is_cjk, p))]
        assert all(len(p.lstrip(WORD_START)) == 1 for p in cjk), (name, text, raw)
        assert "".join(p.lstrip(WORD_START) for p in cjk) == "".join(_cjk_chars(text)), (name, text, raw)


def test_marking_multi_character_pieces_unused_cuts_chinese_into_characters(tiny_translator):
    tok = tiny_translator.tokenizer
    text = "我是一名工程师。今天天气很好。"
    before = [tok.sp.id_to_piece(i) for i in tok.encode(text)]
    assert any(len(p.lstrip(WORD_START)) > 1 for p in before if any(map(is_cjk, p)))   # the tiny model glues
    chars = Tokenizer(one_piece_per_cjk_character(tok.model_proto))
    ids = chars.encode(text)
    after = [chars.sp.id_to_piece(i) for i in ids]
    assert chars.vocab_size == tok.vocab_size
    assert [p.lstrip(WORD_START) for p in after if p.lstrip(WORD_START)] == list(text)
    assert chars.decode(ids) == text
    english = "I am an engineer."
    assert chars.encode(english) == tok.encode(english)       # the English side is untouched


def test_byte_runs_and_word_marks_as_shown(tiny_translator):
    tok = Tokenizer(one_piece_per_cjk_character(tiny_translator.tokenizer.model_proto))
    ids = tok.encode("我🍎 hi 我")
    raw = [tok.sp.id_to_piece(i) for i in ids]
    shown = tok.pieces(ids)
    apple = [f"<0x{b:02X}>" for b in "🍎".encode("utf-8")]
    k = raw.index(apple[0])
    assert raw[k:k + 4] == apple
    assert shown[k:k + 4] == [f"🍎({i}/4)" for i in range(1, 5)]
    assert shown[0] == "我" and raw[0] in ("▁我", "▁")       # ▁ before Chinese at the start: dropped
    assert any(p.startswith(WORD_START) and p.endswith("我") for p in shown[k + 4:])  # after a Latin word: kept
