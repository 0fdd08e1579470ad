"""benchmarks/cpu_by_process: the CPU it counts for a process equals what that process says it used (its own
time.process_time), and Chromium's processes are told apart by their --type."""
from __future__ import annotations

import json
import sys

from benchmarks import cpu_by_process


def test_a_child_s_cpu_is_counted_as_the_child_measures_it(tmp_path):
    out = tmp_path / "used.json"
    burn = (f"import json, time\nx = 0\nwhile time.process_time() < 0.5: x += 1\n"
            f"open({str(out)!r}, 'w').write(json.dumps(time.process_time()))\n"
            f"time.sleep(0.5)")          # idle, so that readings see its whole CPU however late they come
    # exec -a names the process (its argv[0]): its kind, apart from every other Python on the machine
    wall, used, status = cpu_by_process.measure(["bash", "-c", f'exec -a burner-under-test {sys.executable} -c "$0"', burn],
                                        interval=0.1)
    own = json.loads(out.read_text())
    assert abs(used["burner-under-test"] - own) < 0.05, (used, own)   # /proc counts in ticks of 0.01 s
    assert wall >= own and status == 0


def test_kinds():
    k = cpu_by_process.kind
    assert k("/usr/lib/chromium/chromium --type=renderer --lang=en-US") == "chromium renderer"
    assert k("/usr/lib/chromium/chromium --headless --no-sandbox") == "chromium main"
    assert k("/usr/bin/python3 -m streamlit run app.py --server.port 8501") == "streamlit"
    assert k("/usr/bin/python3 -m pytest -n 0 tests/test_x.py") == "pytest"
    assert k("/usr/bin/python3 /tmp/other.py") == "python3"
    assert k("") == "(kernel)"


def test_the_command_s_exit_status_is_passed_on():
    assert cpu_by_process.measure([sys.executable, "-c", "raise SystemExit(3)"], interval=0.05)[2] == 3
    assert cpu_by_process.main(["--interval", "0.05", "--", sys.executable, "-c", "pass"]) == 0
