"""What every lesson fact shares: the Fact a kind returns, the registry of kinds, one run per model and text.
The kinds themselves live in claims.py (attention, decoding, order), claims_stack.py (the residual stream, training,
attribution, head roles) and claims_bert.py (a masked LM); importing claims registers them all."""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable, Optional

STRONG = 0.5          # "puts most of its weight on": at least half of the row


@dataclass
class Fact:
    values: dict                  # field -> str | int | float: what a note may fill in as {fact.field}
    holds: bool                   # the lesson's claim is true on this model
    claim: str                    # the claim in words (what a failing test reports)


KINDS: dict[str, Callable[..., Fact]] = {}


def kind(fn):
    KINDS[fn.__name__] = fn
    return fn


def evaluate(name: str, hm, text: str, args: Optional[dict] = None) -> Fact:
    """The fact `name` (a kind in KINDS) for checkpoint hm on text. ValueError for an unknown kind or
    arguments the kind does not take."""
    if name not in KINDS:
        raise ValueError(f"unknown fact kind {name!r}; known: {', '.join(KINDS)}")
    try:
        return KINDS[name](hm, text, **(args or {}))
    except TypeError as e:
        raise ValueError(f"fact {name!r}: {e}") from None


_RUNS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()      # hm -> {text: run}: one run per text


def shared_run(hm, text: str):
    """hm.run(text), once per model and text across the facts of a lesson (a few texts per model)."""
    runs = _RUNS.setdefault(hm, {})
    if text not in runs:
        if len(runs) >= 8:
            runs.pop(next(iter(runs)))
        runs[text] = hm.run(text)
    return runs[text]


def strip_mark(piece: str) -> str:
    """A piece without SentencePiece's word mark ▁."""
    return piece.replace("\u2581", "")
