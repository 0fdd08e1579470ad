"""The two interface languages: the tables agree key for key and placeholder for placeholder, every page
opened with ?lang=zh shows Chinese (no English interface word left, token pieces and code names aside),
and the sidebar switch changes the language while keeping the page, the text and the model."""
from __future__ import annotations

import json
import re
import string

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, ZH as SENTENCE, by_key, figures, open_app, page_file
from views.shell import strings
from views.shell.strings import EN
from views.shell.strings_zh import ZH
from viz_transformer import load_checkpoint

PAGES = ["overview", "attention", "masks", "positional", "step_by_step", "decoding", "knockout", "positions",
         "compare", "architectures", "rollout", "head_stats", "training", "export", "live_class"]
TITLE_KEY = {"live_class": "lc", "overview": "ov", "attention": "at", "masks": "mk", "positional": "pe", "step_by_step": "st",
             "decoding": "dc", "knockout": "ko", "positions": "po", "compare": "cp", "architectures": "ar",
             "rollout": "ro", "head_stats": "hs", "training": "tr", "export": "ex"}
# words that are names, not interface English: formats, products, authors, metrics, code-ish terms
ALLOWED = {"softmax", "sentencepiece", "bleu", "chrf", "top", "json", "html", "csv", "png", "npz", "tatoeba",
           "tinystories", "plotly", "abnar", "zuidema", "jain", "wallace", "mha", "ffn", "relu", "gelu", "viz",
           "transformer", "python", "trace", "out", "begin", "sep", "end", "pad", "unk", "causal", "max", "src",
           "tgt", "attn", "tok", "pos", "rollout"}


def placeholders(s: str) -> list:
    return sorted({(name, spec) for _, name, spec, _ in string.Formatter().parse(s) if name is not None})


def test_both_tables_have_the_same_keys_in_the_same_order():
    missing, extra = [k for k in EN if k not in ZH], [k for k in ZH if k not in EN]
    assert not missing, f"translate these keys into views/shell/strings_zh.py: {missing}"
    assert not extra, f"keys only in ZH (removed from EN?): {extra}"
    assert list(EN) == list(ZH)


def test_both_tables_have_the_same_placeholders():
    bad = {k: (placeholders(EN[k]), placeholders(ZH[k])) for k in EN if placeholders(EN[k]) != placeholders(ZH[k])}
    assert not bad


def test_chinese_strings_are_chinese():
    # a value copied from EN untranslated is caught: only names and formulas may be the same in both
    same = [k for k in EN if EN[k] == ZH[k] and re.search(r"[A-Za-z]{3,} [A-Za-z]{3,}", EN[k])]
    assert not same, same


def test_a_missing_chinese_key_falls_back_to_english(monkeypatch):
    monkeypatch.setattr(strings, "current", lambda: "zh")
    monkeypatch.delitem(ZH, "ov.title")
    assert strings.t("ov.title") == EN["ov.title"]
    assert strings.t("ov.pieces") == ZH["ov.pieces"]


# -- the app in Chinese ---------------------------------------------------------------------------------
def _figure_texts(spec: dict) -> list[str]:
    lay = spec["layout"]
    out = [lay.get("title", {}).get("text", "")]
    for k, v in lay.items():
        if k.startswith(("xaxis", "yaxis")) and isinstance(v, dict):
            out.append((v.get("title") or {}).get("text", ""))
    out += [a.get("text", "") for a in lay.get("annotations", [])]
    for tr in spec["data"]:
        out.append(tr.get("name") or "")
        cb = (tr.get("colorbar") or (tr.get("marker") or {}).get("colorbar") or {})
        out.append((cb.get("title") or {}).get("text", ""))
        out += [str(x) for x in cb.get("ticktext", [])]
    return out


def interface_texts(at) -> list[str]:
    """What a reader sees, apart from the data: titles, text, messages, widget labels and help, figure text."""
    out = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success"):
        out += [str(e.value) for e in getattr(at, kind)]
    for kind in ("button", "selectbox", "slider", "select_slider", "text_area", "text_input", "toggle", "multiselect",
                 "number_input", "radio", "checkbox"):
        for w in getattr(at, kind):
            out += [str(getattr(w, "label", "") or ""), str(getattr(w, "help", "") or "")]
    out += [str(m.label) for m in at.metric]
    for kind in ("button_group", "download_button", "page_link"):
        for e in at.get(kind):
            p = e.proto
            out += [str(getattr(p, "label", "")), str(getattr(p, "help", ""))]
    for spec in figures(at):
        out += _figure_texts(spec)
    return [re.sub(r"<[^>]+>", " ", s) for s in out if s]


def english_words(texts: list[str], allowed: set[str]) -> set[str]:
    found = set()
    for s in texts:
        s = re.sub(r"`[^`]*`", " ", s)                          # code spans are code
        for token in re.findall(r"[\w.'\-]+", s):
            if "_" in token or re.search(r"[A-Za-z]\.[A-Za-z]", token):     # capture names, file names: code
                continue
            found |= {w for w in re.findall(r"[A-Za-z]+", token) if len(w) >= 3 and w.lower() not in allowed}
    return found


@pytest.fixture
def env(ckpt_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    return ckpt_root


def open_zh(page: str = "overview") -> AppTest:
    return open_app(page_file(page), "tiny-zh-en", SENTENCE, lang="zh", timeout=90)


def test_every_page_in_chinese_has_no_english_interface_left(env):
    hm = load_checkpoint(env / "tiny-zh-en")
    run = hm.run(SENTENCE)
    # the model's own words (pieces, its random output), the checkpoint names and what its meta.json says are
    # data, not interface
    data_words = {w.lower() for s in [run.output, *run.tgt_pieces, *run.src_pieces, *(p.name for p in env.iterdir()), str(env),
                                                  json.dumps(hm.meta)]
                  for w in re.findall(r"[A-Za-z]+", s)}
    at = open_zh()
    for page in PAGES:
        if page != "overview":
            at.switch_page(page_file(page))
            at.run(timeout=90)
        assert not at.exception, (page, [e.value for e in at.exception])
        key = TITLE_KEY[page]
        assert at.title[0].value == ZH[f"{key}.title"], page
        left = english_words(interface_texts(at), ALLOWED | data_words)
        assert not left, (page, sorted(left))


def test_the_overview_in_chinese_names_its_blocks_in_chinese(env):
    at = open_zh()
    spec = next(f for f in figures(at) if f["layout"].get("meta", {}).get("blocks"))
    texts = [a.get("text", "") for a in spec["layout"]["annotations"]]
    cfg = load_checkpoint(env / "tiny-zh-en").cfg
    assert ZH["dg.self_attn"].format(h=cfg.n_heads) in texts
    assert ZH["dg.cross_attn"].format(h=cfg.n_heads) in texts
    assert any(ZH["dg.encoder"] in s for s in texts)
    links = [e.proto.label for e in at.get("page_link")]
    assert ZH["ov.link"].format(block=ZH["dg.short.pos"], page=ZH["nav.positional"]) in links


def test_the_switch_changes_language_and_keeps_page_text_and_model(env):
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state["ckpt"] = "tiny-lm"
    at.session_state["text"] = "The cat sat on the mat."
    at.run(timeout=90)
    at.switch_page("views/pages/look/masks.py")
    at.run(timeout=90)
    assert at.title[0].value == EN["mk.title"]
    assert at.query_params.get("lang") in ("en", ["en"])
    switch = next(e for e in at.get("button_group") if e.proto.label == EN["sidebar.lang"])
    assert switch is not None
    at.session_state["lang"] = "zh"            # what clicking 简体中文 sets (its key), then a rerun
    at.query_params["lang"] = "zh"
    at.run(timeout=90)
    assert not at.exception
    assert at.title[0].value == ZH["mk.title"]                       # same page, now in Chinese
    assert by_key(at.sidebar.text_area, "text").value == "The cat sat on the mat."
    assert by_key(at.sidebar.selectbox, "ckpt").value == "tiny-lm"
    assert at.sidebar.text_area[0].label == ZH["sidebar.text"]


def test_lang_en_in_the_url_wins_over_the_session(env):
    at = open_zh()
    assert at.title[0].value == ZH["ov.title"]
    at.query_params["lang"] = "en"
    at.run(timeout=90)
    assert at.title[0].value == EN["ov.title"]


def test_every_latex_formula_parses_as_balanced_braces():
    for key, f in strings.LATEX.items():
        depth = 0
        for ch in re.sub(r"\\[{}]", "", f):
            depth += ch == "{"
            depth -= ch == "}"
            assert depth >= 0, key
        assert depth == 0, key
    assert json.dumps(strings.LATEX)
