"""Write the built-in held-out corpora from the training data in ../shared/data (run once, keep the output).

    python -m viz_transformer.training.corpora.build [--data ../shared/data]

zh: sources of the Tatoeba held-out splits that the zh-en checkpoints never trained on: the source-split
    test then val sets (data.split_by_source, seed 1234, 1500 test, 1000 val), minus every source that is
    in the training set of the older pair split (data.split, same seed; checkpoints/zh-en was trained on
    it) or of the source split: 182 unique lines; then 3AM validation captions (never trained on: the
    translators train on Tatoeba and at most 3AM's train split) up to 250.
en: sentences of the TinyStories validation stories of checkpoints/en-stories (data.split, seed 1234,
    n_test 0, n_val 100: its meta.json), each not found verbatim anywhere in its training stories; 250 lines.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from viz_transformer.training import data as D
from viz_transformer.training.corpora import FILES, HERE

SEED, N_TEST, N_VAL, N_LM_VAL, N_LINES = 1234, 1500, 1000, 100, 250
_SENTENCE = re.compile(r"(?<=[.!?])[\"”]?\s+")


def zh_lines(tsv: Path) -> list[tuple[str, str]]:
    """(source, attribution) of held-out Chinese sentences, in the split's shuffled order."""
    rows = [line.split("\t") for line in tsv.read_text(encoding="utf-8").splitlines()[1:]]
    credit = {(r[0].strip(), r[1].strip()): (r[2].strip() if len(r) > 2 else "") for r in rows}
    pairs = D.read_pairs(tsv)
    train_src, val_src, test_src = D.split_by_source(pairs, SEED, N_TEST, N_VAL)
    train_pair, _, _ = D.split(pairs, SEED, N_TEST, N_VAL)
    seen = {s for s, _ in train_src} | {s for s, _ in train_pair}
    out, used = [], set()
    for s, t in test_src + val_src:          # test first; the pair split put most test sources in training
        if s not in seen and s not in used and len(s) >= 2:
            out.append((s, credit.get((s, t), "")))
            used.add(s)
    return out[:N_LINES]


def zh_captions(folder: Path, n: int) -> list[tuple[str, str]]:
    """(caption, credit) of the 3AM validation captions (never in any training set here), 8-40 characters."""
    lines = [s.strip() for s in (folder / "val.zh").read_text(encoding="utf-8").splitlines()]
    return [(s, "3AM dataset (LREC-COLING 2024), val split, MIT") for s in lines if 8 <= len(s) <= 40][:n]


def en_lines(stories_path: Path) -> list[str]:
    """Held-out story sentences never found verbatim in the training stories."""
    train, val, _ = D.split(D.read_stories(stories_path), SEED, 0, N_LM_VAL)
    seen = "\n".join(train)
    out = []
    for story in val:
        for s in _SENTENCE.split(" ".join(story.split())):
            if 25 <= len(s) <= 160 and s not in seen and s not in out:
                out.append(s)
    return out[:N_LINES]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[3].parent / "shared" / "data"))
    a = p.parse_args(argv)
    zh = zh_lines(Path(a.data) / "zh-en" / "tatoeba-cmn-eng.tsv")
    zh += zh_captions(Path(a.data) / "zh-en" / "3am-captions", N_LINES - len(zh))   # Tatoeba holds out 182
    en = en_lines(Path(a.data) / "lm" / "tinystories-2MiB.txt")
    (HERE / FILES["zh"]).write_text("".join(s + "\n" for s, _ in zh), encoding="utf-8")
    (HERE / "heldout_zh.attribution.tsv").write_text("".join(f"{s}\t{c}\n" for s, c in zh), encoding="utf-8")
    (HERE / FILES["en"]).write_text("".join(s + "\n" for s in en), encoding="utf-8")
    print(f"wrote {len(zh)} Chinese and {len(en)} English lines to {HERE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
