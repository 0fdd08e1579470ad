"""How a translator's tokenizer cuts Chinese: the share of Chinese pieces that span two, three or more
characters on the validation and test sources, and the app's teaching sentences, checkpoints side by side.

    python -m benchmarks.chinese_pieces checkpoints/zh-en-v1 checkpoints/zh-en
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from viz_transformer.core.checkpoint_files import load_tokenizer, read_meta
from viz_transformer.core.tokenizer import WORD_START, is_cjk
from viz_transformer.training.evaluation import translation_splits

TEACHING = ["我是一名工程师。", "我喜欢你。", "你喜欢我。", "今天天气很好。", "我们明天去北京开会，然后回上海。"]


def chinese_pieces(tok, text: str) -> list[str]:
    """The text's pieces that hold a CJK character, as SentencePiece cut them (▁ removed)."""
    raw = [tok.sp.id_to_piece(i).replace(WORD_START, "") for i in tok.encode(text)]
    return [p for p in raw if any(map(is_cjk, p))]


def shares(tok, sources: list[str]) -> dict:
    pieces = [p for s in sources for p in chinese_pieces(tok, s)]
    n = max(len(pieces), 1)
    return {"pieces": len(pieces), "2+ characters": round(sum(len(p) >= 2 for p in pieces) / n, 4),
            "3+ characters": round(sum(len(p) >= 3 for p in pieces) / n, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--data", default=None, help="the corpus (default: the first checkpoint's meta.json data)")
    args = ap.parse_args()
    _, val, test = translation_splits(read_meta(args.checkpoints[0]), args.data)
    out = {}
    for folder in args.checkpoints:
        tok = load_tokenizer(folder)
        out[folder.name] = {"val": shares(tok, [s for s, _ in val]), "test": shares(tok, [s for s, _ in test]),
                            "teaching": {t: " · ".join(chinese_pieces(tok, t)) for t in TEACHING}}
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
