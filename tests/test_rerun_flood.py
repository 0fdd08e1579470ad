"""A session that asks for 100 reruns a second (a script, a stuck key): the real server keeps serving another
session's pages, and the flooding session itself answers normally once it stops."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from streamlit.proto.BackMsg_pb2 import BackMsg

from stclient import Server, Session

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.browser      # a real server (tests/conftest.py makes it slow too)


async def flood(s: Session, n: int, per_second: float) -> None:
    """n rerun requests of s's current page, sent without waiting for any run to finish."""
    for _ in range(n):
        msg = BackMsg()
        msg.rerun_script.page_script_hash = s.page_hash
        msg.rerun_script.query_string = s.query
        await s.ws.send(msg.SerializeToString())
        await asyncio.sleep(1 / per_second)


async def drain(s: Session, quiet: float = 3.0) -> int:
    """Read what the server sends until it has said nothing for `quiet` seconds; how many messages."""
    n = 0
    while True:
        try:
            await asyncio.wait_for(s.ws.recv(), quiet)
            n += 1
        except asyncio.TimeoutError:
            return n


def test_a_flood_of_reruns_does_not_stop_the_others(ckpt_root, tmp_path):
    async def go(url):
        noisy, calm = await Session.open(url), await Session.open(url)
        await noisy.rerun()
        await calm.rerun()
        r = await calm.rerun({"text": "我爱你。"})
        assert not r.exceptions
        times = []
        flooding = asyncio.create_task(flood(noisy, 200, 100))
        for title in ("Attention: heads and layers", "Step-through decoding", "Overview"):
            t0 = time.perf_counter()
            r = await calm.goto(title)
            times.append(time.perf_counter() - t0)
            assert not r.exceptions and r.elements, title
        await flooding
        assert await drain(noisy) > 0                           # it was answered, not dropped
        r = await noisy.goto("Attention: heads and layers")     # and it goes on like any session
        if not r.elements:                                      # a last flood run's end was still on its way
            r = await noisy.goto("Attention: heads and layers")
        assert not r.exceptions and any(k == "plotly_chart" for k, _ in r.elements)
        await noisy.close()
        await calm.close()
        return times
    with Server(ROOT, ckpt_root, log=tmp_path / "server.log", env={"VIZ_DATA": str(tmp_path)}) as server:
        times = asyncio.run(go(server.url))
        assert server.proc.poll() is None
    assert max(times) < 60, times
