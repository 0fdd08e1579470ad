"""The fresh-process warm-up (viz_explorer/startup/warmup.py: a blank chart, code and a formula) is sent before torch is
imported and gone when the run ends; a process that already has torch sends none."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=120)
at.query_params["checkpoint"] = "zh-en"      # a link: not the preview of a fresh Overview (tests/test_preview.py)
at.run()
charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
print(json.dumps({"torch": "torch" in sys.modules, "exceptions": [e.value for e in at.exception],
                  "blank_left": sum(1 for c in charts if c["layout"].get("height") == 10),
                  "code_left": sum(1 for c in at.get("code") if c.proto.code_text == " "),
                  "latex_left": sum(1 for m in at.latex if m.value.strip("$\\n") == "\\,")}))
"""


def _run(preimport: bool) -> dict:
    import json
    code = ("import torch\n" if preimport else "") + SCRIPT
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "app.py")], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow          # a fresh python process
def test_the_warmup_chart_is_removed_when_the_first_run_ends():
    r = _run(preimport=False)
    assert r["torch"] and not r["exceptions"] and r["blank_left"] == r["code_left"] == r["latex_left"] == 0


def test_a_warm_process_sends_no_warmup_chart(monkeypatch):
    import streamlit  # noqa: F401
    import torch  # noqa: F401
    from viz_explorer.startup import warmup
    calls = []
    monkeypatch.setattr(warmup.st, "empty", lambda: calls.append(1))
    assert warmup.plotly_early() is None and not calls
