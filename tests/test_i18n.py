"""The two interface languages: the tables agree key for key and placeholder for placeholder, every page
opened with ?lang=zh shows Chinese (no English interface word left, token pieces and code names aside),
and the sidebar switch changes the language while keeping the page, the text and the model. Each Chinese string
records the English it translates (a changed English string is named until re-translated), and a count prints
"1 piece", "2 pieces"."""
from __future__ import annotations

import hashlib
import json
import re
import runpy
import string

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, ZH as SENTENCE, by_key, figures, open_app, page_file
from viz_explorer.kit import strings, strings_check
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH
from viz_explorer.kit.strings_zh_source import SOURCE
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
    """The format fields of s; a plural word {n:piece|pieces} is English grammar, not a placeholder."""
    return sorted({(name, spec) for _, name, spec, _ in string.Formatter().parse(s)
                   if name is not None and "|" not in spec})


def test_both_tables_have_the_same_keys_in_the_same_order():
    missing, extra = [k for k in EN if k not in ZH], [k for k in ZH if k not in EN]
    assert not missing, f"translate these keys into viz_explorer/kit/strings_zh.py: {missing}"
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


# -- strings that cannot go stale -------------------------------------------------------------------------
def sha8(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def test_every_chinese_string_translates_todays_english():
    found = strings_check.problems(EN, ZH, SOURCE)
    assert not found, "\n".join(found)


def test_a_changed_english_string_is_named_until_its_chinese_is_recorded_again():
    assert SOURCE["nav.masks"] == sha8("Masks")
    en = {**EN, "nav.masks": "Attention masks"}                  # an English string changed by hand
    zh = {k: v for k, v in ZH.items() if k != "ov.title"}
    found = strings_check.problems(en, zh, SOURCE)
    assert [line.split(":")[0] for line in found] == ["ov.title", "nav.masks"]
    assert "missing from ZH" in found[0] and "'Attention masks'" in found[1] and "'掩码'" in found[1]
    fixed = strings_check.updated(en, ZH, SOURCE, ["nav.masks"])    # what --update nav.masks records
    assert fixed == {**SOURCE, "nav.masks": sha8("Attention masks")}
    assert not strings_check.problems(en, ZH, fixed)


def test_update_writes_a_table_that_reads_back(tmp_path):
    en, zh = {"a.one": "One", "a.two": "Two {n}", "a.gone": "x"}, {"a.one": "一", "a.two": "二 {n}"}
    path = tmp_path / "source.py"
    strings_check.write(strings_check.updated(en, zh, {"a.gone": "00000000"}), path)
    assert runpy.run_path(str(path))["SOURCE"] == {"a.one": sha8("One"), "a.two": sha8("Two {n}")}
    with pytest.raises(KeyError):
        strings_check.updated(en, zh, {}, ["a.gone"])


# -- plural words -----------------------------------------------------------------------------------------
@pytest.fixture
def english(monkeypatch):
    monkeypatch.setattr(strings, "current", lambda: "en")


@pytest.mark.parametrize("key, kw, text", [
    ("hs.n", {"n": 1}, "Measured over 1 sentence."),
    ("hs.n", {"n": 2}, "Measured over 2 sentences."),
    ("hs.n", {"n": 0}, "Measured over 0 sentences."),
    ("ls.draft", {"n": 1}, "1 step in this lesson so far."),
    ("dc.cut", {"new": 1, "n": 1}, "To leave room for 1 new token, the prompt was cut: its first 1 piece is not used here."),
    ("dc.cut", {"new": 20, "n": 2},
     "To leave room for 20 new tokens, the prompt was cut: its first 2 pieces are not used here."),
    ("cf.line_empty", {"rare": 1, "n": 1}, "confidence: no output token to score · 1 of 1 piece rare"),
    ("cf.line_empty", {"rare": 1, "n": 2}, "confidence: no output token to score · 1 of 2 pieces rare"),
    ("cf.why.rare_input", {"rare": 1, "n": 3, "unseen": 0},
     "1 of the input's 3 pieces is rare in its training data (0 never seen)"),
    ("ko.n_off", {"n": 1, "total": 1}, "1 of 1 head knocked out."),
    ("ko.n_off", {"n": 1, "total": 8}, "1 of 8 heads knocked out."),
    ("sidebar.layers_d", {"dec": 1}, "1 layer"),
    ("lc.err.rate", {"seconds": 1}, "Too many answers from this browser: wait 1 second."),
    ("ar.trust.weak", {"bleu": 3.2, "epochs": "?"}, "Too small or too undertrained to trust on this sentence: it is "
     "unsure here, and its test BLEU is only 3.2 after ? epochs (under 20: even the gist is hard to get)."),
])
def test_a_count_of_one_takes_the_singular(english, key, kw, text):
    assert strings.t(key, **kw) == text


def test_a_count_keeps_its_own_format():
    assert strings.fill("after {k:,} {k:update|updates}", k=1234) == "after 1,234 updates"
    assert strings.fill("after {k:,} {k:update|updates}", k=1) == "after 1 update"


def test_chinese_has_no_plural_words(monkeypatch):
    assert not any(strings.PLURAL.search(v) for v in ZH.values())
    monkeypatch.setattr(strings, "current", lambda: "zh")
    assert strings.t("hs.n", n=1) == ZH["hs.n"].format(n=1)


def test_the_diagram_gets_its_plural_words_chosen_and_its_other_fields_left():
    assert strings.plurals(EN["dg.self_attn"], h=1) == "Multi-head self-attention · {h} head"
    assert strings.plurals(EN["dg.cross_attn"], h=4).format(h=4) == "Cross-attention (K, V from the encoder) · 4 heads"
    assert strings.plurals(EN["dg.ffn.gated"], h=1) == EN["dg.ffn.gated"]


def test_every_plural_word_follows_a_count_the_string_prints():
    for key, s in EN.items():
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(s) if name is not None]
        counts = {name for name, spec in fields if "|" not in spec}
        for name, spec in fields:
            if "|" in spec:
                assert strings.PLURAL.search("{%s:%s}" % (name, spec)) and name in counts, (key, name, spec)


def test_other_strings_format_as_before(english):
    # t is plain str.format for every string without a plural word
    for key, s in EN.items():
        names = {name for _, name, _, _ in string.Formatter().parse(s) if name}
        if names and not strings.PLURAL.search(s):
            kw = dict.fromkeys(names, 1)
            assert strings.t(key, **kw) == s.format(**kw), key


# a count printed before a plural noun, at most two words between: "{n} pieces", "({n} training pairs)"
COUNT_NOUN = re.compile(r"\{(\w+)(?::[^{}|]*)?\}((?: (?!and |of |or |to |in |on )[a-z][\w-]*){0,2}?) ([a-z]\w*[^s\W]s)\b")
VERBS = {"has", "keeps", "puts", "continues", "looks", "reads", "says", "shows", "takes", "gives", "means"}
NOT_A_COUNT = {"sidebar.layers_ed": "a sum of two counts: 1+1 layers",
               "ov.intro": "{tokenizer} is a name: SentencePiece pieces",
               "ar.checkpoint": "a model's parameter count, never 1"}


def bare_counts(s: str) -> list[str]:
    return [m[0] for m in COUNT_NOUN.finditer(s) if m[3] not in VERBS] + re.findall(r"\w+\(s\)", s)


def test_no_english_count_is_followed_by_a_plural_noun_without_the_rule():
    assert bare_counts("its first {n} pieces, ({n:,} training pairs), {n} step(s)") == \
        ["{n} pieces", "{n:,} training pairs", "step(s)"]
    assert not bare_counts("its first {n} {n:piece|pieces}; {block} keeps {a} and keys")
    bare = {k: bare_counts(s) for k, s in EN.items() if k not in NOT_A_COUNT and bare_counts(s)}
    assert not bare, f"write {{n}} {{n:piece|pieces}}: {bare}"


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
    read = lambda s: re.sub(r"<br>|·|\s", "", s)    # noqa: E731  (a label fitted to its block may break its line)
    texts = [read(a.get("text", "")) for a in spec["layout"]["annotations"]]
    cfg = load_checkpoint(env / "tiny-zh-en").cfg
    assert read(ZH["dg.self_attn"].format(h=cfg.n_heads)) in texts
    assert read(ZH["dg.cross_attn"].format(h=cfg.n_heads)) in texts
    assert any(ZH["dg.encoder"] in s for s in texts)
    links = [e.proto.label for e in at.get("page_link")]
    assert ZH["ov.link"].format(block=ZH["dg.short.pos"], page=ZH["nav.positional"]) in links


def test_the_switch_changes_language_and_keeps_page_text_and_model(env):
    at = AppTest.from_file(APP, default_timeout=90)
    at.session_state["ckpt"] = "tiny-lm"
    at.session_state["text"] = "The cat sat on the mat."
    at.run(timeout=90)
    at.switch_page("viz_explorer/pages/look/masks.py")
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


def _unrendered_bold(text: str) -> bool:
    """True when a CommonMark renderer (markdown-it, as the browser's renderer follows the same spec) leaves a
    `**` as text: e.g. a closing `**` after Chinese punctuation and before a character (`（T5）**位置`)."""
    from markdown_it import MarkdownIt
    return "**" in MarkdownIt("commonmark").render(text)


def test_every_bold_span_renders_in_both_languages():
    assert _unrendered_bold("使用**相对位置（T5）**位置编码") and not _unrendered_bold("使用**正弦**位置编码")
    placeholder = re.compile(r"\{[^{}]*\}")
    bad = [f"{lang}:{k}" for lang, table in (("en", EN), ("zh", ZH)) for k, s in table.items()
           if isinstance(s, str) and "**" in s and _unrendered_bold(placeholder.sub("x", s))]
    # a bold placeholder filled with each of its values: the positional page's kind of encoding
    for lang, table in (("en", EN), ("zh", ZH)):
        bad += [f"{lang}:pe.uses with {k}" for k in table if k.startswith("pe.kind.")
                if _unrendered_bold(strings.fill(table["pe.uses"], kind=table[k], d=32, L=512))]
    assert not bad, bad
