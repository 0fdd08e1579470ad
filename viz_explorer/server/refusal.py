"""What a person did that the server refuses, as one exception: `key` names it, `kw` fills in its message, str() is
the one-line English message; the page shows the strings' translation of the same key."""
from __future__ import annotations


class Refusal(ValueError):
    MESSAGES: dict[str, str] = {}          # key -> its one-line English message (each subclass has its own)

    def __init__(self, key: str, **kw):
        super().__init__(self.MESSAGES[key].format(**kw))
        self.key, self.kw = key, kw
