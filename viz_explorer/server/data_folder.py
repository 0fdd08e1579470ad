"""Where the server keeps what it writes (the SQLite database, the corpus results): VIZ_DATA, else data/ beside
app.py. No database import: the first page's modules read it without loading SQLAlchemy."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def folder() -> Path:
    return Path(os.environ.get("VIZ_DATA") or ROOT / "data")
