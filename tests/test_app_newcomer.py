"""Small things a newcomer met (AppTest on the tiny checkpoints): the activation patching page refuses a pair of
texts of different lengths in one sentence, in the interface's language, with the two counts the tokenizer gives;
the Chinese interface calls the reveal button by one word in lessons and in the live class."""
from __future__ import annotations

import pytest

from app_util import by_key, open_app, texts
from viz_explorer.kit.strings import EN, fill
from viz_explorer.kit.strings_zh import ZH
from viz_transformer import load_checkpoint

A, B = "我爱你。", "我们明天去北京开会。"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_patching_refusal_says_its_sentence_once(env, lang):
    tok = load_checkpoint(env / "tiny-zh-en").tokenizer
    n_a, n_b = (len(tok.encode(x)) + 1 for x in (A, B))              # + [end], as the encoder reads them
    assert n_a != n_b
    at = open_app("viz_explorer/pages/experiment/patching.py", text=A, lang=lang)
    by_key(at.text_input, "pt_text_translator").input(B).run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    table = EN if lang == "en" else ZH
    shown = texts(at)
    sentence = table["pt.align"].split("{")[0].strip()             # the refusal's words, before its counts
    assert shown.count(sentence) == 1, shown
    assert [w.value for w in at.warning] == [fill(table["pt.align"], a=n_a, b=n_b)]
    assert "same number of pieces" not in shown.lower().replace(sentence.lower(), "")   # not again, in other words
    lines = at.code[0].value.splitlines()
    assert [len(line.split(": ", 1)[1].split()) for line in lines] == [n_a, n_b]        # the pieces themselves


def test_the_reveal_button_has_one_chinese_name():
    assert ZH["qz.reveal"] == ZH["lc.reveal"]
    assert f"“{ZH['qz.reveal']}”" in ZH["qz.hint"]                  # the hint names the button as it is labelled
