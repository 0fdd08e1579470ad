"""Many students at once: 20 websocket sessions against one real server, each typing its own text and
opening the attention, decoding and lab pages (with an ablation), all at the same time. Each must see
exactly what a lone session sees for its text (captured first, one session at a time), with no errors."""
from __future__ import annotations

import asyncio
import shutil
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from stclient import Server, student  # noqa: E402

TEXTS = ["我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。", "他是我的朋友。", "我们明天去北京。",
         "这是我的书。", "她在学校工作。", "我是一名工程师。", "我爱喝茶。", "他是学生。", "今天很好。", "你是我的朋友。",
         "我们去学校。", "她喜欢书。", "这是我的茶。", "他叫什么名字？", "我明天去工作。", "天气很好。"]


def seen(result: dict) -> dict:
    return {step: r.signature() for step, r in result.items() if step != "open"}


def test_twenty_students_at_once_each_see_their_own_results(ckpt_root, tmp_path):
    assert len(set(TEXTS)) == 20
    root = tmp_path / "checkpoints"
    shutil.copytree(ckpt_root / "tiny-zh-en", root / "zh-en")          # the default: a translator
    with Server(ROOT, root, log=tmp_path / "server.log") as server:
        alone = {}
        for text in TEXTS:                                       # one session at a time: the reference
            r = asyncio.run(student(server.url, text))
            assert not any(x.exceptions for x in r.values()), text
            alone[text] = seen(r)

        async def together():
            return await asyncio.gather(*(student(server.url, text) for text in TEXTS))
        results = asyncio.run(together())
        assert server.proc.poll() is None                        # still serving
    for text, r in zip(TEXTS, results):
        errors = {step: x.exceptions for step, x in r.items() if x.exceptions}
        assert not errors, (text, errors)
        assert seen(r) == alone[text], text
        assert r["overview"].signature()["code"], text           # the translation is there
    outputs = [alone[t]["overview"]["code"][0] for t in TEXTS]
    figures = [tuple(alone[t]["attention"]["figures"]) for t in TEXTS]
    assert len(set(figures)) == 20, "texts too alike to tell the sessions apart"
    assert len(set(outputs)) >= 2
