"""A size in MiB from the environment (VIZ_CACHE_MB, VIZ_RESULTS_MB), read one way: garbage or a negative number is
logged and the default holds, so a mistyped setting never stops the server."""
from __future__ import annotations

import logging
import os

log = logging.getLogger("viz_transformer.app")


def mib_bytes(name: str, default: float, environ=os.environ) -> int:
    """The environment's `name` (MiB, 0 or more) in bytes, else `default` MiB."""
    raw = environ.get(name, "").strip()
    try:
        mb = float(raw) if raw else default
        if not 0 <= mb < float("inf"):
            raise ValueError(raw)
    except ValueError:
        log.warning("%s=%r is not a number of MiB (0 or more): the default, %s MiB, holds", name, raw[:40], default)
        mb = default
    return int(mb * 2**20)
