"""Live-class clients for tests and benchmarks: a student or the teacher as light websocket sessions
(benchmarks/stclient.py) on the live class page, and what the teacher's page shows."""
from __future__ import annotations

import json

from benchmarks.stclient import Session

LABELS = {"got_it": "Got it", "unsure": "Not sure", "lost": "Lost"}      # the check-in poll in English


async def open_class(url: str, query: str) -> tuple[Session, object]:
    """A session on the live class page with this query string (class=…&me=…, or teach=… for the teacher's page)."""
    s = await Session.open(url)
    s.page_name, s.query = "live_class", query + "&lang=en"
    return s, await s.rerun()


async def open_teacher(url: str, code: str, secret: str) -> tuple[Session, object]:
    """The teacher's page in a new browser (no session, no cookie): the teacher key typed in, as a teacher does."""
    s, _ = await open_class(url, f"teach={code}")
    return s, await s.rerun({"lc_key": secret}, trigger="lc_key_go")


def radio_key(s: Session) -> str:
    return s.key_starting("lc_pick_")


async def send(s: Session, option: str):
    """Pick `option` (its stored value) in the answer box and press Send: a run of the box's fragment only."""
    return await s.rerun({radio_key(s): LABELS[option]}, trigger="lc_send")


def teacher_view(res) -> tuple[list[int], str]:
    """(the chart's bar heights in option order, the "answered" metric) from a run of the teacher's page."""
    charts = [json.loads(e.plotly_chart.spec) for e in res.of("plotly_chart")]
    metrics = [e.metric.body for e in res.of("metric") if e.metric.label == "Answered"]
    ys = charts[-1]["data"][0]["y"] if charts else []
    return [int(v) for v in ys], metrics[0] if metrics else ""
