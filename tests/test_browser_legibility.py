"""Every chart legible, English interface (tests/test_browser_legibility_zh.py: the Chinese one; two files so that
pytest.ini's two workers walk the two languages at once): the session's real server in Debian's chromium walks
every page and every tab at 7, ~30 and ~120 pieces, for zh-en, zh-en-decoder and en-stories, and measures each
drawn chart
(tests/legibility.js): no plot side under 110 px, no two labels overlapping (rotated boxes), no label past
the chart's edge, no colour bar or legend taller than its plot. The report and a PNG of each failing chart
are written under test-artifacts/legibility/ (report-en.json, report-zh.json). On the same pages, each walk also
checks that no request leaves the app's own server (browser_util.Offline: the page icon, the fonts).

One page, one language, one length, from the shell (same options as benchmarks/legibility.py), or as the
test with LEGIBILITY_ARGS:

    python -m tests.test_browser_legibility --pages masks --lang zh --lengths 120
    LEGIBILITY_ARGS="--pages masks --lang zh" python -m pytest tests/test_browser_legibility_zh.py
"""
from __future__ import annotations

import sys

import pytest

from benchmarks import legibility
from browser_util import Offline, legible

pytestmark = pytest.mark.browser


ONCE = ("--checkpoint", "zh-en", "--lengths", "30")      # every page and tab once: one translator, one length


@pytest.mark.walk
def test_every_chart_is_legible(server):
    offline = Offline()
    legible("en", server, offline)
    offline.verify()


def test_every_page_once_is_legible(server):
    """The walk's measurement on every page and tab once, at a laptop's size: the default run's share of the walk."""
    offline = Offline()
    legible("en", server, offline, narrow=ONCE)
    offline.verify()


if __name__ == "__main__":
    sys.exit(legibility.main())
