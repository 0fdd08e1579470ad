"""Every chart legible, Chinese interface: tests/test_browser_legibility.py's walk (its docstring says what is
measured) with ?lang=zh, in a file of its own so that pytest.ini's two workers walk the two languages at once."""
from __future__ import annotations

import pytest

from browser_util import legible

pytestmark = pytest.mark.browser


def test_every_chart_is_legible_in_chinese(server):
    legible("zh", server)
