"""A light Streamlit client: one websocket session speaking the browser's protobuf protocol, no browser.

    s = await Session.open("http://127.0.0.1:8501")
    r = await s.rerun()                                  # the default page
    r = await s.rerun({"text": "我是学生。"})              # a widget, by its key
    r = await s.goto("Knock out heads"); r = await s.click("ko_all_encoder.self_attn_0")

Used by tests/test_concurrency.py and benchmarks/bench_load.py. Each rerun returns what the server
sent: the elements (by type), exceptions, and how long the run took from the request to
script_finished. Widget ids are learned from the elements, as the browser learns them.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import websockets
from benchmarks.procfs import cpu_seconds, rss_mib
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg


def _cookies(url: str) -> str:
    import urllib.request
    with urllib.request.urlopen(url.rstrip("/") + "/", timeout=60) as r:
        return "; ".join(c.split(";", 1)[0] for c in r.headers.get_all("Set-Cookie") or [])



class KeepAlive:
    """GET requests over one kept-alive HTTP/1.1 connection, as a browser's fetch() reuses its connection (opened
    again if the server closed it)."""

    def __init__(self, url: str, cookie: str = ""):
        host = url.split("://", 1)[1].split("/", 1)[0]
        self.host, self.port = host.rsplit(":", 1)[0], int(host.rsplit(":", 1)[1]) if ":" in host else 80
        self.cookie, self.reader, self.writer = cookie, None, None

    async def get(self, path: str, timeout: float = 60) -> tuple[int, bytes]:
        for attempt in (0, 1):
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
                head = f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                self.writer.write((head + (f"Cookie: {self.cookie}\r\n" if self.cookie else "") + "\r\n").encode())
                await self.writer.drain()
                status_line = await asyncio.wait_for(self.reader.readline(), timeout)
                if not status_line:
                    raise ConnectionResetError("closed")
                lines = (await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), timeout)).decode("latin-1")
                length = next((int(x.split(":", 1)[1]) for x in lines.split("\r\n")
                               if x.lower().startswith("content-length:")), 0)
                body = await asyncio.wait_for(self.reader.readexactly(length), timeout)
                return int(status_line.split()[1]), body
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = self.reader = None

@dataclass
class Result:
    seconds: float
    elements: list = field(default_factory=list)   # (type, Element proto) in the order they arrived
    exceptions: list = field(default_factory=list)
    n_bytes: int = 0
    fragments: set = field(default_factory=set)    # the fragments whose elements arrived

    def of(self, kind: str) -> list:
        return [e for k, e in self.elements if k == kind]

    def signature(self) -> dict:
        """What a session saw, comparable across sessions: code blocks, plain text (a model's output),
        markdown/captions, tables, and each figure's data (its traces, without uids)."""
        figs = []
        for e in self.of("plotly_chart"):
            spec = json.loads(e.plotly_chart.spec or "{}")
            figs.append(hashlib.sha1(json.dumps(spec.get("data"), sort_keys=True).encode()).hexdigest()[:12])
        tables = [hashlib.sha1(e.arrow_data_frame.data).hexdigest()[:12] for e in self.of("arrow_data_frame")]
        return {"code": [e.code.code_text for e in self.of("code")], "figures": figs, "tables": tables,
                "plain": [e.text.body for e in self.of("text")], "text": [e.markdown.body for e in self.of("markdown")]}


class Session:
    def __init__(self, ws, url: str):
        self.ws, self.url = ws, url
        self.ids: dict[str, object] = {}     # widget key -> its latest element proto (has .id)
        self.pages: dict[str, str] = {}      # page title -> page_script_hash
        self.page_hash = ""
        self.states: dict[str, object] = {}  # widget id -> WidgetState to send with every rerun
        self.query = ""                      # the address's query string (?class=...), sent with every rerun
        self.page_name = ""                  # the page's url path, for the first run (before page_hash is known)
        self.fragment_of: dict[str, str] = {}  # widget id -> the fragment it lives in ("" for none)
        self.auto_rerun = ""                   # the latest fragment the server asked to rerun on a timer

    @classmethod
    async def open(cls, url: str) -> "Session":
        """Load the page first, as a browser does, and keep its cookies (a load balancer's route)."""
        cookie = await asyncio.to_thread(_cookies, url)
        ws_url = url.replace("http", "ws", 1).rstrip("/") + "/_stcore/stream"
        ws = await websockets.connect(ws_url, subprotocols=["streamlit"], max_size=64 << 20, open_timeout=60,
                                      ping_interval=None, additional_headers={"Cookie": cookie} if cookie else None)
        s = cls(ws, url)
        s.cookie = cookie
        return s

    async def close(self) -> None:
        await self.ws.close()

    def _widget(self, key: str):
        for wid, proto in self.ids.items():
            if wid.endswith("-" + key) or wid == key:
                return wid, proto
        raise KeyError(f"no widget with key {key!r} on this page; known: {sorted(self.ids)}")

    async def rerun(self, values: Optional[dict] = None, trigger: Optional[str] = None,
                    timeout: float = 300, fragment: str = "") -> Result:
        """Set widgets (by key) to values, optionally press a button (by key), and run the script (or only
        `fragment`, as the browser does for a fragment's run_every or a widget inside it)."""
        for key, v in (values or {}).items():
            wid, _ = self._widget(key)
            st = self.states.setdefault(wid, BackMsg().rerun_script.widget_states.widgets.add())
            st.Clear()
            st.id = wid
            if isinstance(v, str):
                st.string_value = v
            elif isinstance(v, bool):
                st.bool_value = v
            elif isinstance(v, int):
                st.int_value = v
            elif isinstance(v, float):
                st.double_value = v
            else:
                st.string_array_value.data.extend(v)
        msg = BackMsg()
        rs = msg.rerun_script
        rs.page_script_hash = self.page_hash
        rs.query_string = self.query
        if not self.page_hash:
            rs.page_name = self.page_name
        for st in self.states.values():
            rs.widget_states.widgets.add().CopyFrom(st)
        if trigger:
            wid, _ = self._widget(trigger)
            w = rs.widget_states.widgets.add()
            w.id, w.trigger_value = wid, True
            fragment = fragment or self.fragment_of.get(wid, "")
        if fragment:
            rs.fragment_id = fragment
            rs.is_auto_rerun = trigger is None
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        res = Result(0.0)
        if not fragment:                     # a fragment's run sends only its own elements: keep the others
            self.ids = {}
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), timeout)
            res.n_bytes += len(raw)
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            kind = fm.WhichOneof("type")
            if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                k = el.WhichOneof("type")
                res.elements.append((k, el))
                if k == "exception":
                    res.exceptions.append(el.exception.message)
                wid = getattr(getattr(el, k), "id", "") if k else ""
                if wid:
                    self.ids[wid] = el
                    self.fragment_of[wid] = fm.delta.fragment_id
                if fm.delta.fragment_id:
                    res.fragments.add(fm.delta.fragment_id)
            elif kind == "auto_rerun":               # a fragment with run_every: the browser reruns it
                self.auto_rerun = fm.auto_rerun.fragment_id
            elif kind == "navigation":
                self.pages = {p.page_name: p.page_script_hash for p in fm.navigation.app_pages}
                for p in fm.navigation.app_pages:
                    if p.page_script_hash == fm.navigation.page_script_hash:
                        self.page_hash = p.page_script_hash
            elif kind == "script_finished":
                if fm.script_finished == fm.FINISHED_SUCCESSFULLY or fm.script_finished == fm.FINISHED_WITH_COMPILE_ERROR:
                    break
                if fm.script_finished == fm.FINISHED_EARLY_FOR_RERUN:   # st.rerun(): keep reading
                    res.elements, self.ids = [], {}
                    continue
                break
        res.seconds = time.perf_counter() - t0
        # widget states the server knows now are what the browser would send next time
        return res

    async def goto(self, title: str, values: Optional[dict] = None) -> Result:
        self.page_hash = self.pages[title]
        self.states = {w: s for w, s in self.states.items() if w.endswith(("-text", "-ckpt"))}
        return await self.rerun(values)

    async def click(self, key: str) -> Result:
        return await self.rerun(trigger=key)

    def key_starting(self, prefix: str) -> str:
        """The first widget key on the page that starts with prefix (e.g. the first "all of L0" button)."""
        return next(w.split("-", 2)[-1] for w in self.ids if w.split("-", 2)[-1].startswith(prefix))


async def student(url: str, text: str, think: float = 0.0, cookies: Optional[list] = None) -> dict:
    """One student: open the app, type a text, open the attention and decoding pages (one step), and
    knock out a layer's heads on the lab page. Returns step -> Result."""
    s = await Session.open(url)
    if cookies is not None:
        cookies.append(s.cookie)
    out = {}
    try:
        out["open"] = await s.rerun()
        for step, action in (("overview", lambda: s.rerun({"text": text})),
                             ("attention", lambda: s.goto("Attention: heads and layers")),
                             ("decoding", lambda: s.goto("Step-through decoding")),
                             ("decoding.next", lambda: s.click("dc_next")),
                             ("knockout", lambda: s.goto("Knock out heads")),
                             ("knockout.ablate", lambda: s.click(s.key_starting("ko_all_")))):
            await asyncio.sleep(think)
            out[step] = await action()
    finally:
        await s.close()
    return out


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> int:
    """The first of n consecutive free loopback ports (deploy/serve.sh's app processes take VIZ_APP_PORT and up)."""
    import socket
    for _ in range(100):
        base = free_port()
        try:
            held = []
            for p in range(base, base + n):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports found")


class Server:
    """`streamlit run app.py` (or `entry`: serve.py) on a free loopback port (context manager): .url, .proc,
    .cpu_seconds()."""

    def __init__(self, root, checkpoints=None, port: Optional[int] = None, log=None, env=None, args=(),
                 entry: str = "app.py"):
        import os
        self.root, self.port = root, port or free_port()
        self.env = dict(os.environ, **(env or {}))
        if checkpoints:                   # the given root alone, as the benchmark measured it (not the shipped too)
            self.env.update(VIZ_CHECKPOINTS=str(checkpoints), VIZ_CHECKPOINTS_ONLY="1")
        self.log, self.args, self.entry = log, list(args), entry
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Server":
        import subprocess
        import sys
        import urllib.request
        out = open(self.log, "w") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", self.entry, "--server.headless", "true",
                                      "--server.address", "127.0.0.1", "--server.port", str(self.port), *self.args],
                                     cwd=self.root, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=2).read() == b"ok":
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.__exit__()
                raise RuntimeError(f"streamlit did not start on {self.url} (log: {self.log})")
            time.sleep(0.3)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server process has used so far (Linux /proc)."""
        return cpu_seconds(self.proc.pid)

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except Exception:  # noqa: BLE001 - it did not stop: kill it
            self.proc.kill()


def deploy(n: int, root, env=None, echo: bool = False):
    """deploy/serve.sh with n app processes behind nginx on a free port, started and healthy: (its process, the
    address, its run folder). Stop it with proc.terminate()."""
    import os
    import subprocess
    import tempfile
    import urllib.request
    port, run_dir = free_port(), tempfile.mkdtemp(prefix="viz-deploy-bench-")
    proc = subprocess.Popen(["bash", str(Path(root) / "deploy/serve.sh"), str(n), str(port)],
                            env=dict(os.environ, **(env or {}), RUN_DIR=run_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    for line in proc.stdout:
        if echo:
            print("  serve.sh:", line.rstrip(), flush=True)
        if line.startswith("serving"):
            break
    for _ in range(60):                                     # nginx starts just after the line
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=5).read()
            break
        except OSError:
            time.sleep(0.5)
    return proc, url, run_dir


def stop(server=None, proc=None) -> None:
    """Stop a Server (its context) and a deploy's process, either of them None."""
    if server is not None:
        server.__exit__()
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)
