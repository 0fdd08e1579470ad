"""Every chart legible: the real server in Debian's chromium walks every page and every tab at 7, ~30 and ~120
pieces, for zh-en, zh-en-decoder and en-stories, in English and in Chinese, and measures each drawn chart
(tests/legibility.js): no plot side under 110 px, no two labels overlapping (rotated boxes), no label past
the chart's edge, no colour bar or legend taller than its plot. The report and a PNG of each failing chart
are written under test-artifacts/legibility/.

One page, one language, one length, from the shell (same options as benchmarks/legibility.py), or as the
test with LEGIBILITY_ARGS:

    python -m tests.test_browser_legibility --pages masks --lang zh --lengths 120
    LEGIBILITY_ARGS="--pages masks --lang zh" python -m pytest tests/test_browser_legibility.py
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from benchmarks import legibility

ROOT = Path(__file__).resolve().parent.parent

CHECKPOINTS = ROOT / "checkpoints"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(legibility.CHROMIUM).exists(), reason=f"{legibility.CHROMIUM} is missing"),
              pytest.mark.skipif(not all((CHECKPOINTS / c / "model.safetensors").exists() for c in legibility.CHECKPOINTS),
                                 reason="the shipped checkpoints are missing")]


def test_every_chart_is_legible():
    args = legibility.options(shlex.split(os.environ.get("LEGIBILITY_ARGS", "")) + ["--checkpoints", str(CHECKPOINTS)])
    views, path = legibility.walk(args, log=lambda *a: print(*a, flush=True))
    rows = legibility.problems(views)
    charts = sum(len(v["charts"]) for v in views)
    print(f"\n{legibility.summary(views)}\nreport {path}")
    assert charts, "no chart was measured"
    if any(v["exceptions"] or v.get("error") for v in views):
        pytest.fail(legibility.summary(views), pytrace=False)
    if rows:
        pytest.fail(f"{len(rows)} of {charts} charts are illegible (report: {path}, PNGs beside it)\n"
                    + legibility.table(rows) + "\n\n" + legibility.summary(views), pytrace=False)


if __name__ == "__main__":
    sys.exit(legibility.main())
