"""A class store's refusal (store.ClassError) in the interface's language, for every class page."""
from __future__ import annotations

from viz_explorer.classroom.store import ClassError
from viz_explorer.kit.strings import EN, t


def say(e: ClassError) -> str:
    key = f"lc.err.{e.key}"
    return t(key, **e.kw) if key in EN else str(e)
