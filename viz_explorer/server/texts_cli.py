"""`viz-transformer texts`: what the texts behind shared links hold, and `--purge` to empty them (a teacher's
command; viz_explorer/server/texts.py says what is stored)."""
from __future__ import annotations

import argparse
import datetime
import math
import sys


def _days(raw: str) -> float:
    value = float(raw)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(raw)
    return value


_days.__name__ = "number of days"           # argparse names the type in its message


def main(argv: list[str], prog: str = "viz-transformer texts") -> int:
    p = argparse.ArgumentParser(prog=prog, description="The texts stored behind shared links (in the app's "
                                "database: VIZ_DATABASE_URL, else <VIZ_DATA>/viz.sqlite3).")
    p.add_argument("--purge", action="store_true", help="remove the stored texts, ids and all")
    p.add_argument("--older-than", type=_days, metavar="DAYS", help="with --purge: only those older than DAYS")
    args = p.parse_args(argv)
    if args.older_than is not None and not args.purge:
        p.error("--older-than goes with --purge")
    import sqlalchemy as sa

    from viz_explorer.server import db, texts
    where = sa.engine.make_url(db.url()).render_as_string(hide_password=True)
    try:
        if args.purge:
            n = texts.purge(args.older_than)
            print(f"removed {n} {'text' if n == 1 else 'texts'} from {where}")
            return 0
        held, cap = texts.summary(), texts.limits()
    except sa.exc.SQLAlchemyError as e:
        print(f"error: the database {where} cannot be read: {str(e).splitlines()[0][:120]}", file=sys.stderr)
        return 2
    oldest = "-" if held["oldest"] is None else datetime.datetime.fromtimestamp(held["oldest"]).isoformat(" ", "minutes")
    print(f"{held['texts']} texts, {held['bytes']:,} bytes, the oldest stored {oldest}; {held['expired']} expired "
          f"ids kept. Limits: {cap.days:g} days, {cap.mb:g} MB ({where})")
    for name in cap.ignored:
        print(f"note: {name} is not a positive number: its default holds", file=sys.stderr)
    return 0
