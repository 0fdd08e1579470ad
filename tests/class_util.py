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


async def open_student(url: str, code: str, me: str, logs=()) -> Session:
    """A student's session on the class page; fails, with what the page drew instead and the tails of `logs` (the
    servers' log files), unless it shows the answer box."""
    s, res = await open_class(url, f"class={code}&me={me}")
    assert any(w.split("-", 2)[-1].startswith("lc_pick_") for w in s.ids), (
        f"no answer box for student {me}; the page drew:\n{drawn(res)}\n--- the servers' logs:\n"
        + "\n".join(str(p) + ":\n" + p.read_text()[-2000:] for p in logs))
    return s


def drawn(res) -> str:
    """What a run drew, in one line per element (its kind and text): a failing check shows what was there instead."""
    out = []
    for k, e in res.elements:
        x = getattr(e, k)
        body = getattr(x, "body", "") or getattr(x, "message", "") or getattr(x, "label", "")
        out.append(f"{k}: {body!s:.200}")
    return "\n".join(out)


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
