"""A model's cache key: its folder, and for a multilingual translator (mBART, M2M100, NLLB) the language pair a
session chose, so every cached model, run and trace of one pair is apart from another's.

    key = with_pair("/models/nllb", ("zho_Hans", "eng_Latn"))     # "/models/nllb#zho_Hans>eng_Latn"
    folder_of(key), pair_of(key)                                   # "/models/nllb", ("zho_Hans", "eng_Latn")

The pages pass str(ctx.path) and ctx.stamp to every cached function; the sidebar makes ctx.path this key, so a pair
is part of every key without a page knowing of it.
"""
from __future__ import annotations

from typing import Optional

MARK, ARROW = "#", ">"


def with_pair(folder, pair: Optional[tuple[str, str]]) -> str:
    """The key of a folder read with a language pair (the folder alone when pair is None)."""
    folder = str(folder_of(str(folder)))
    return folder if pair is None else f"{folder}{MARK}{pair[0]}{ARROW}{pair[1]}"


def folder_of(key) -> str:
    """The folder a key names."""
    key = str(key)
    head, mark, tail = key.rpartition(MARK)
    return head if mark and ARROW in tail and "/" not in tail else key


def pair_of(key) -> Optional[tuple[str, str]]:
    """The (source, target) pair a key carries, or None."""
    key = str(key)
    if folder_of(key) == key:
        return None
    src, _, tgt = key.rpartition(MARK)[2].partition(ARROW)
    return src, tgt
