"""The start-up load (viz_explorer/startup/load.py): a first page run in a fresh process waits for it behind a
loading note and a blank chart, and ends with the page alone; a load that fails still says it is over, so no
visitor waits forever, and the page run meets the error itself."""
import gc
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=120)
at.run()
charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
print(json.dumps({"torch": "torch" in sys.modules, "exceptions": [e.value for e in at.exception],
                  "blank_left": sum(1 for c in charts if c["layout"].get("height") == 10),
                  "charts": len(charts), "output": [c.value for c in at.text],
                  "notes": [c.value for c in at.caption if "Loading the model" in c.value]}))
"""


@pytest.mark.slow          # a fresh python process
def test_a_fresh_first_run_ends_with_the_page_alone(ckpt_root):
    from viz_explorer.server import defaults
    from viz_transformer import list_checkpoints, load_checkpoint
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT / "app.py")], capture_output=True, text=True,
                         cwd=ROOT, timeout=300, env={**os.environ, "VIZ_CHECKPOINTS": str(ckpt_root)})
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["torch"] and not r["exceptions"] and r["charts"] > 0
    assert r["blank_left"] == 0 and r["notes"] == []              # the note and the blank chart are gone
    first = next(i for i in list_checkpoints(ckpt_root) if i.error is None)     # the sidebar's pick here
    hm = load_checkpoint(first.path)
    assert hm.run(defaults.EXAMPLES[defaults.kind(hm.cfg)][0]).output in r["output"]   # the model's own output
    assert "ready in" in out.stderr                                 # the first run started the load and waited


def test_a_failed_load_still_signals_ready(monkeypatch):
    from viz_explorer.kit import sidebar  # noqa: F401 - imported first: sidebar and cached bind checkpoint_roots
    from viz_explorer.server import cached, defaults  # noqa: F401 - at import, and must not keep the broken one for good
    from viz_explorer.startup import load
    monkeypatch.setattr(load, "_ready", threading.Event())
    monkeypatch.setattr(load, "_started", threading.Lock())

    def broken():
        raise OSError("disk gone")
    monkeypatch.setattr(defaults, "checkpoint_roots", broken)
    load.start()
    try:
        assert load._ready.wait(120)              # wait() would return: the page run then meets the error itself
        assert load.ready()
        assert gc.isenabled()                     # the collector, off while the load imports, is on again
    finally:
        gc.unfreeze()                             # what the load froze goes back to the collector of this test process


def test_the_load_freezes_what_it_made_and_turns_the_collector_back_on(monkeypatch):
    """The collector is off while the load imports (the collections its garbage sets off would fall on the first page) and on
    again afterwards, with what the load left alive frozen out of its reach: the first page's collection is short.
    The GIL's switch interval is short meanwhile (the server serves the browser's files), then as it was."""
    from viz_explorer.server import defaults
    from viz_explorer.startup import load
    monkeypatch.setattr(load, "_ready", threading.Event())
    seen = []
    monkeypatch.setattr(defaults, "checkpoint_roots",
                        lambda: seen.append((gc.isenabled(), sys.getswitchinterval())) or [])
    assert gc.isenabled()
    frozen, switch = gc.get_freeze_count(), sys.getswitchinterval()
    try:
        load.load()
        assert seen == [(False, load.SWITCH_S)]   # off during the load, and the GIL handed over sooner
        assert gc.isenabled() and load.ready() and sys.getswitchinterval() == switch
        assert gc.get_freeze_count() > frozen     # this test process's objects, frozen by the load
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("shipped_first", [True, False])
def test_the_load_picks_the_sidebar_s_default_over_every_root(ckpt_root, tmp_path, monkeypatch, shipped_first):
    """Roots are added beside the shipped folder: the default (defaults.CHECKPOINT) is loaded wherever it is, and
    with none, the first good model of any root, even a root that is itself one model folder after an empty one."""
    import shutil
    from viz_explorer.server import cached, defaults
    from viz_explorer.startup import load
    shipped, mine = tmp_path / "shipped", tmp_path / "mine"
    shipped.mkdir()
    if shipped_first:
        shutil.copytree(ckpt_root / "tiny-zh-en", shipped / defaults.CHECKPOINT)
    shutil.copytree(ckpt_root / "tiny-lm", mine)                   # a root that is one model folder
    monkeypatch.setattr(defaults, "checkpoint_roots", lambda: [shipped, mine])
    monkeypatch.setattr(load, "_ready", threading.Event())
    loaded = []
    monkeypatch.setattr(cached, "load_model", lambda path, stamp: loaded.append(Path(path)) or _Model())
    monkeypatch.setattr(cached, "run_text", lambda *a, **k: None)
    load.load()
    assert loaded == [shipped / defaults.CHECKPOINT if shipped_first else mine]


class _Model:
    class cfg:
        is_translator = False
