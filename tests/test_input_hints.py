"""The right hint for the input: a text in another script than the model reads gets one plain line saying so
(viz_transformer.analysis.scripts, checked on hand-written texts), and a text too long for the model gets one
notice, in plain words, of what was left out: not a second length warning beside each output."""
from __future__ import annotations

import json
import shutil
import unicodedata

import pytest

from app_util import ZH, open_app, texts
from conftest import EN, ZH as ZH_SENTENCES, tiny_tokenizer
from viz_explorer.kit.strings import EN as EN_STRINGS
from viz_explorer.kit.strings_zh import ZH as ZH_STRINGS
from viz_transformer import load_checkpoint
from viz_transformer.analysis import scripts
from viz_transformer.analysis.confidence import KEY, piece_stats
from viz_transformer.core.encoding import encode_input, left_out


@pytest.mark.parametrize("text, script", [
    ("I am an engineer.", "latin"),
    ("我是一名工程师。", "han"),
    ("Café crème, s'il vous plaît.", "latin"),           # accented letters are Latin
    ("我爱Tom。", "han"),                                  # two Chinese words, one Latin
    ("汤姆是我的朋友 (Tom)。", "han"),
    ("Beijing 北京 is big.", "latin"),                      # three Latin words, two Chinese
    ("I love 北京", None),                                  # two and two: mixed
    ("2024 !? 123", None),                                 # no letters at all
    ("", None),
])
def test_the_dominant_script_of_hand_written_texts(text, script):
    assert scripts.dominant(text) == script


def test_a_model_s_script_comes_from_what_it_was_trained_on():
    tok = tiny_tokenizer()                                  # one vocabulary for Chinese and English
    zh_inputs = {KEY: {"pieces": piece_stats(tok, ZH_SENTENCES)}}
    en_inputs = {KEY: {"pieces": piece_stats(tok, EN)}}
    assert scripts.model_script(tok, zh_inputs) == "han"
    assert scripts.model_script(tok, en_inputs) == "latin"
    assert scripts.model_script(tok, {"demo": {"我爱你。": "I love you."}}) == "han"     # no statistics: its demos
    assert scripts.model_script(tok, {}) is None and scripts.model_script(tok, None) is None
    assert scripts.mismatch("I love you.", "han") == "latin"
    assert scripts.mismatch("我爱你。", "han") is None
    assert scripts.mismatch("I love you.", None) is None                              # unknown: no hint


def test_left_out_is_the_text_the_model_does_not_read(tiny_translator, tiny_lm):
    text = "".join(ZH_SENTENCES * 8)
    for hm, cut_at in ((tiny_translator, "end"), (tiny_lm, "start")):
        inp = encode_input(hm.tokenizer, hm.cfg, text)
        gone = left_out(hm.tokenizer, hm.cfg, text, inp)
        specials = {hm.cfg.pad_id, hm.cfg.bos_id, hm.cfg.eos_id, hm.cfg.sep_id}
        kept = hm.tokenizer.decode([i for i in inp.ids if i not in specials])     # the pieces it reads
        assert inp.cut_at == cut_at and inp.n_cut > 0 and gone
        whole = (kept + gone if cut_at == "end" else gone + kept).replace(" ", "")
        assert whole == unicodedata.normalize("NFKC", text)                     # as SentencePiece reads it
    assert left_out(tiny_translator.tokenizer, tiny_translator.cfg, "我爱你。",
                    encode_input(tiny_translator.tokenizer, tiny_translator.cfg, "我爱你。")) == ""


# -- the app ----------------------------------------------------------------------------------------
@pytest.fixture
def env(ckpt_root, tmp_path, monkeypatch):
    """Tiny models that record what they were trained on: a Chinese-source translator (its demos) and an
    English language model (its training pieces), and a translator calibrated to call 6+ pieces long."""
    root = tmp_path / "checkpoints"
    for name, meta in (("zh-src", {"demo": {s: "" for s in ZH_SENTENCES}}),
                       ("en-lm", {KEY: {"pieces": piece_stats(tiny_tokenizer(), EN)}}),
                       ("short", {"demo": {ZH: ""}, KEY: {"thresholds": {"longest_input": 5}}})):
        src = ckpt_root / ("tiny-lm" if name == "en-lm" else "tiny-zh-en")
        shutil.copytree(src, root / name)
        path = root / name / "meta.json"
        path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), **meta}), encoding="utf-8")
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(root))
    return root


def _lines(at, key_start: str) -> list[str]:
    return [w.value for w in at.warning if w.value.startswith(key_start)]


def test_latin_letters_into_a_chinese_source_get_one_plain_line(env):
    line = EN_STRINGS["in.mismatch.translator"].format(model="Chinese characters", text="Latin letters")
    at = open_app(ckpt="zh-src", text="I am an engineer.")
    assert [w.value for w in at.warning].count(line) == 1
    at = open_app(ckpt="zh-src", text=ZH)
    assert line not in texts(at)
    at = open_app(ckpt="zh-src", text="I am an engineer.", lang="zh")
    assert ZH_STRINGS["in.mismatch.translator"].format(model="汉字", text="拉丁字母") in texts(at)


def test_chinese_into_the_english_language_model_gets_one_plain_line(env):
    line = EN_STRINGS["in.mismatch.lm"].format(model="Latin letters", text="Chinese characters")
    at = open_app("viz_explorer/pages/look/attention.py", ckpt="en-lm", text=ZH)
    assert [w.value for w in at.warning].count(line) == 1
    at = open_app("viz_explorer/pages/look/attention.py", ckpt="en-lm", text="Once upon a time there was a dog.")
    assert line not in texts(at)


def test_a_cut_text_is_said_once_in_plain_words(env):
    hm = load_checkpoint(env / "short")
    text = "".join(f"第{i}句。" for i in range(40)) + "最后一句在这里。"
    at = open_app("viz_explorer/pages/experiment/knockout.py", ckpt="short", text=text)
    gone = left_out(hm.tokenizer, hm.cfg, text, encode_input(hm.tokenizer, hm.cfg, text))
    said = [w.value for w in at.warning if "left out" in w.value or "longer" in w.value]
    assert len(said) == 1, said                            # not again beside each of the two outputs
    assert "max_len" not in said[0] and "reads only the beginning" in said[0]
    assert f"“{gone[:10]}" in said[0] and f"({len(gone)} characters)" in said[0]
    assert "最后一句在这里" in gone
