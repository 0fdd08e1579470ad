"""deploy/serve.sh takes its addresses and ports from the environment: nginx listens where VIZ_LISTEN and VIZ_PORT
say (on every interface by default once VIZ_PUBLIC_URL is set), the app processes on VIZ_APP_PORT and up. Run with
stand-ins for nginx and python (a health endpoint on each port), so no app starts: the written nginx.conf is read."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow           # a subprocess (bash), though a quick one

FAKE_PYTHON = f"""#!/bin/sh
# stands in for `python -m streamlit run serve.py ... --server.port P`: answers /_stcore/health on P; has no Streamlit
# to find (`python -c ...` fails)
case "$1" in -c) exit 1 ;; esac
while [ $# -gt 0 ]; do [ "$1" = --server.port ] && port=$2; [ "$1" = --server.address ] && addr=$2; shift; done
echo "$addr:$port" >> "$FAKE_LOG"
exec {sys.executable} -c "
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'ok')
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()" "$port"
"""
FAKE_NGINX = """#!/bin/sh
# stands in for nginx: -t passes, a run waits, -s stop returns
case "$*" in *" -t "*|"-t "*) exit 0 ;; *"-s stop"*) exit 0 ;; esac
exec sleep 600
"""


def _free_ports(n: int) -> list[int]:
    import socket
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def serve(tmp_path: Path, env: dict, args: tuple = ()) -> tuple[str, list[str]]:
    """Run serve.sh with the stand-ins until nginx would start; (the nginx.conf it wrote, the apps' addresses)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    for name, text in (("python", FAKE_PYTHON), ("nginx", FAKE_NGINX)):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    run, log = tmp_path / "run", tmp_path / "apps.txt"
    full = {k: v for k, v in os.environ.items() if not k.startswith("VIZ_")}
    full.update(PATH=f"{bin_}:{os.environ['PATH']}", NGINX=str(bin_ / "nginx"), RUN_DIR=str(run),
                FAKE_LOG=str(log), **env)
    proc = subprocess.Popen(["bash", str(ROOT / "deploy" / "serve.sh"), *args], env=full, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while not (run / "nginx.conf").exists():
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read()
            time.sleep(0.2)
        time.sleep(0.3)
        return (run / "nginx.conf").read_text(), log.read_text().split()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def test_ports_and_listen_address_from_the_environment(tmp_path):
    port, app = _free_ports(2)
    conf, apps = serve(tmp_path, {"VIZ_PORT": str(port), "VIZ_APP_PORT": str(app), "VIZ_PROCESSES": "2",
                                  "VIZ_LISTEN": "192.0.2.10"})
    assert f"listen 192.0.2.10:{port};" in conf
    assert f"server 127.0.0.1:{app} " in conf and f"server 127.0.0.1:{app + 1} " in conf
    assert sorted(apps) == [f"127.0.0.1:{app}", f"127.0.0.1:{app + 1}"]


def test_without_streamlits_page_files_nothing_is_copied_and_the_apps_serve_them(tmp_path):
    """The stand-in python finds no Streamlit: serve.sh copies nothing (never a folder it did not find) and nginx
    passes /static/ to the app processes, as every other path."""
    import glob
    before = set(glob.glob("/tmp/viz-static.*"))
    conf, _ = serve(tmp_path, {"VIZ_PORT": str(_free_ports(1)[0])})
    assert "location /static/" not in conf and "@STATIC@" not in conf and "location / {" in conf
    assert set(glob.glob("/tmp/viz-static.*")) == before


def test_a_public_address_listens_on_every_interface(tmp_path):
    port, app = _free_ports(2)
    conf, apps = serve(tmp_path, {"VIZ_PUBLIC_URL": "http://192.168.1.20:8500", "VIZ_APP_PORT": str(app)},
                       ("1", str(port)))                                         # the arguments still work
    assert f"listen 0.0.0.0:{port};" in conf and apps == [f"127.0.0.1:{app}"]


def test_unset_stays_on_loopback_and_ipv6_is_bracketed(tmp_path):
    port, app = _free_ports(2)
    conf, _ = serve(tmp_path, {"VIZ_PORT": str(port), "VIZ_APP_PORT": str(app), "VIZ_PROCESSES": "1"})
    assert f"listen 127.0.0.1:{port};" in conf
    (tmp_path / "v6").mkdir()
    conf, _ = serve(tmp_path / "v6", {"VIZ_PORT": str(port), "VIZ_APP_PORT": str(app), "VIZ_PROCESSES": "1",
                                      "VIZ_LISTEN": "::"})
    assert f"listen [::]:{port};" in conf
