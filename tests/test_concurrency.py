"""Many students at once: 20 websocket sessions against one real server, each typing its own text and
opening the attention, decoding and lab pages (with an ablation), all at the same time. Each must see
exactly what a lone session sees for its text (captured first, one session at a time), with no errors."""
from __future__ import annotations

import asyncio
import shutil

import pytest

from conftest import ROOT

from stclient import Server, student

pytestmark = pytest.mark.browser          # a real server (websocket sessions, no Chromium)

TEXTS = ["我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。", "他是我的朋友。", "我们明天去北京。",
         "这是我的书。", "她在学校工作。", "我是一名工程师。", "我爱喝茶。", "他是学生。", "今天很好。", "你是我的朋友。",
         "我们去学校。", "她喜欢书。", "这是我的茶。", "他叫什么名字？", "我明天去工作。", "天气很好。"]


def seen(result: dict) -> dict:
    return {step: r.signature() for step, r in result.items() if step != "open"}


@pytest.fixture(scope="session")
def direct(ckpt_root, tmp_path_factory):
    """One app process on the tiny translator (named zh-en, so it opens by default)."""
    tmp = tmp_path_factory.mktemp("direct")
    shutil.copytree(ckpt_root / "tiny-zh-en", tmp / "checkpoints" / "zh-en")
    with Server(ROOT, tmp / "checkpoints", log=tmp / "server.log") as server:
        yield server


@pytest.fixture(scope="session")
def alone(direct):
    """What each text shows to a student who is alone on the server (one session at a time)."""
    out = {}
    for text in TEXTS:
        r = asyncio.run(student(direct.url, text))
        assert not any(x.exceptions for x in r.values()), text
        out[text] = seen(r)
    figures = [tuple(out[t]["attention"]["figures"]) for t in TEXTS]
    assert len(set(figures)) == 20, "texts too alike to tell the sessions apart"
    return out


def test_twenty_students_at_once_each_see_their_own_results(direct, alone):
    async def together():
        return await asyncio.gather(*(student(direct.url, text) for text in TEXTS))
    results = asyncio.run(together())
    assert direct.proc.poll() is None                            # still serving
    for text, r in zip(TEXTS, results):
        errors = {step: x.exceptions for step, x in r.items() if x.exceptions}
        assert not errors, (text, errors)
        assert seen(r) == alone[text], text
        assert r["overview"].signature()["plain"], text          # the translation is there
