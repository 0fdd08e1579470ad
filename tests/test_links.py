"""Links to a view (viz_explorer/lessons/links.py): every setting through the query and back, bad values left at
their defaults with one line, a long text by its id in the database, and in the app: a link opened in a
fresh session shows its settings, the address bar follows the view, lesson parameters and secrets."""
from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, open_app, page_file, tables
from viz_explorer.server import db, texts
from viz_explorer.lessons import lesson_file, links, view_state
from viz_explorer.kit.strings import EN, fill

# one valid, non-default value of every setting (a new setting without one fails the first test)
SAMPLES = {"checkpoint": "zh-en", "text": "我爱你 & you? 100% #1 a+b=c\nnext line", "block": "decoder.cross_attn",
           "layer": 2, "head": 3, "row": 5, "key": 4, "words": True, "strategy": "beam", "max_new_tokens": 7, "beam_width": 3,
           "ablate": [["decoder.1.cross_attn", 3], ["encoder.0.self_attn", 1]], "ablate_mode": "mean",
           "permutation": "swap", "other_text": "你爱我。", "over": "resid", "prefix_len": 4, "lens_step": 3,
           "tab": "scores", "no_sink": True, "decode_step": 5, "temperature": 0.7, "top_k": 5, "top_p": 0.9,
           "seed": 42, "divisor": 2.5, "positions": 50, "depth": "first", "source": "builtin", "stat": "entropy",
           "threshold": 0.65, "snapshot": 3, "sentence": 2}


@pytest.fixture
def env(ckpt_root, monkeypatch, tmp_path):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    monkeypatch.setenv("VIZ_DATA", str(tmp_path))
    db.dispose()
    yield
    db.dispose()


def _unknown(tid):
    return texts.Lookup("unknown")


def _query(settings: dict) -> dict:
    """The query of settings whose texts are all short: nothing waits for a stored id."""
    query, waiting = links.to_query(settings, {})
    assert waiting == [], "a short text must go in the link itself"
    return query


def _through_address(query: dict) -> dict:
    """The query as a browser reads it back out of the link (urllib's parser: an independent reference)."""
    return dict(parse_qsl(urlsplit(links.address("http://h/attention", query)).query, keep_blank_values=True))


def test_every_setting_goes_through_the_link_and_back():
    assert set(SAMPLES) == set(lesson_file.SETTINGS)
    lesson_file.check_settings(SAMPLES, "samples")
    for key, value in SAMPLES.items():
        context = {"strategy": "sample"} if key in links.SAMPLING else {"strategy": "beam"}
        settings = {**context, key: value}
        query = _through_address(_query(settings))
        assert key in query, (key, query)
        back, ignored, expired = links.from_query(query, _unknown)
        assert ignored == expired == [] and back == settings, (key, back)


def test_defaults_and_unread_settings_stay_out_of_the_link():
    assert _query(dict(links.DEFAULTS)) == {}
    query = _query({"strategy": "greedy", "temperature": 0.5, "beam_width": 6, "layer": 0})
    assert query == {"layer": "0"}      # sampling and beam settings are not read by a greedy search


@pytest.mark.parametrize("key, raw", [("layer", "x"), ("layer", "-1"), ("layer", "1.5"), ("head", "99"),
                                      ("block", "encoder.cross_attn"), ("words", "maybe"), ("ablate", "encoder.x:1"),
                                      ("ablate", "decoder.1.cross_attn:"), ("temperature", "nan"),
                                      ("temperature", "5"), ("tab", "nowhere"), ("strategy", "Greedy"),
                                      ("text", ""), ("tid", "0123456789ab"), ("tid", "../../etc"),
                                      ("stat", "<b>x</b>")])
def test_a_bad_value_is_named_and_left_out(key, raw):
    settings, ignored, _ = links.from_query({key: raw, "row": "2", "utm_source": "mail"}, _unknown)
    assert settings == {"row": 2}                              # the rest of the link still counts
    assert len(ignored) == 1 and ignored[0].startswith(f"{key}=")
    assert "utm_source" not in ignored[0]                    # not ours: not a complaint


def test_a_long_text_stays_out_of_the_address_until_it_is_stored(env):
    long = "我是一名工程师。" * 40 + " & = # %"
    settings = {"text": long, "other_text": long[:20], "layer": 1}
    query, waiting = links.to_query(settings, {})
    assert query == {"other_text": long[:20], "layer": "1"} and waiting == ["text"]   # no text, no id
    assert len(quote(long[:20])) <= links.LONG < len(quote(long))       # the limit is what decided
    tid = texts.put(long, "browser-a")
    query, waiting = links.to_query(settings, {long: tid})
    assert query == {"tid": tid, "other_text": long[:20], "layer": "1"} and waiting == []
    assert len(links.address("http://h/", {"tid": tid})) < 40
    db.dispose()                                              # another process: a new engine on the same file
    back, ignored, expired = links.from_query(_through_address(query), texts.get)
    assert ignored == expired == [] and back == settings


def test_an_expired_text_is_named_apart_from_a_bad_id():
    lookups = {"expiredAAAAA": texts.Lookup("expired"), "unknownAAAAA": texts.Lookup("unknown")}
    settings, ignored, expired = links.from_query({"tid": "expiredAAAAA", "other_tid": "unknownAAAAA", "layer": "1"},
                                                  lookups.__getitem__)
    assert settings == {"layer": 1} and expired == ["tid"] and ignored == ["other_tid=unknownAAAAA"]


def test_the_model_decides_what_is_out_of_range(tiny_translator, tiny_lm):
    cfg, lm = tiny_translator.cfg, tiny_lm.cfg                # 2 + 2 layers, 4 heads; the LM has no encoder
    ok = {"block": "decoder.cross_attn", "layer": 1, "head": 3}
    assert links.fit("attention", ok, cfg, None, {}) == (ok, [])
    kept, dropped = links.fit("attention", {"block": "encoder.self_attn", "layer": 2, "head": 4}, lm, None, {})
    assert kept == {} and dropped == ["block=encoder.self_attn", "layer=2", "head=4"]
    kept, dropped = links.fit("knockout", {"ablate": [["decoder.0.self_attn", 1], ["encoder.0.self_attn", 1]]},
                              lm, None, {})
    assert kept == {"ablate": [["decoder.0.self_attn", 1]]} and dropped == ["ablate=encoder.0.self_attn:1"]
    assert links.fit("masks", {"tab": "scores"}, cfg, None, {})[1] == ["tab=scores"]      # step-by-step's tab
    assert links.fit("decoding", {"layer": cfg.n_decoder_layers}, cfg, None, {})[1] == ["layer=2"]
    assert links.fit("positional", {"positions": cfg.max_len + 1}, cfg, None, {})[1] == [f"positions={cfg.max_len + 1}"]
    run = tiny_translator.run("我爱你。")
    rows = len(run.tgt_pieces)                                 # the decoder's query rows of this text
    assert links.fit("step_by_step", {"row": rows - 1}, cfg, run, {})[1] == []
    assert links.fit("step_by_step", {"row": rows}, cfg, run, {})[1] == [f"row={rows}"]


def _open_link(page: str, query: dict) -> AppTest:
    """A fresh session opening `query` on `page`, as a browser opening the link would."""
    at = AppTest.from_file(APP, default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    if page != "overview":
        at.switch_page(page_file(page))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _link(at) -> str:
    return next(c.value for c in at.sidebar.code if "checkpoint=" in c.value)


@pytest.mark.parametrize("page, query, state", [
    ("attention", {"block": "decoder.cross_attn", "layer": "1", "head": "3", "words": "1"},
     {"at_block": "decoder.cross_attn", "at_layer": 1, "at_head": 3, "at_words": True}),
    ("step_by_step", {"tab": "scores", "layer": "1", "head": "2"},
     {"st_tab": EN["st.tab.scores"], "st_layer": 1, "st_head": 2}),
    ("decoding", {"strategy": "beam", "beam_width": "2", "decode_step": "2", "layer": "1"},
     {"dc_strategy": "beam", "dc_width": 2, "dc_step": 2, "dc_layer": 1}),
    ("knockout", {"ablate": "encoder.0.self_attn:1,decoder.1.cross_attn:3", "ablate_mode": "mean"},   # canonical order
     {"ko_pick_decoder.cross_attn": [EN["ko.cell"].format(layer=1, head=3)],
      "ko_pick_encoder.self_attn": [EN["ko.cell"].format(layer=0, head=1)], "ko_mode": "mean"}),
    ("patching", {"other_text": "你爱我。", "over": "blocks"}, {"pt_text_translator": "你爱我。", "pt_over": "blocks"}),
])
def test_a_link_opens_its_view_and_the_address_follows(env, page, query, state):
    query = {"checkpoint": "tiny-zh-en", "text": "我爱你。", **query}
    at = _open_link(page, query)
    assert {k: at.session_state[k] for k in state} == state
    assert not at.info or all("link" not in i.value.lower() for i in at.info)        # nothing was ignored
    address = {k: v for k, v in at.query_params.items()}
    assert {k: address[k][0] if isinstance(address[k], list) else address[k] for k in query} == query
    again = _open_link(page, dict(parse_qsl(urlsplit(_link(at)).query)))          # the copied link
    assert {k: again.session_state[k] for k in state} == state


def test_out_of_range_values_fall_back_with_one_line(env):
    at = _open_link("attention", {"checkpoint": "tiny-lm", "text": "Once upon a time.", "block": "encoder.self_attn",
                                  "layer": "7", "head": "2", "words": "perhaps"})
    notes = [i.value for i in at.info if "link" in i.value]
    assert len(notes) == 1 and all(s in notes[0] for s in ("words=perhaps", "block=encoder", "layer=7"))
    assert at.session_state["at_block"] == "decoder.self_attn" and at.session_state["at_layer"] == 0
    assert at.session_state["at_head"] == 2                   # what was valid still counts
    at = _open_link("overview", {"checkpoint": "no-such-model", "text": "我爱你。"})
    assert [i.value for i in at.info if "link" in i.value] == [EN["link.ignored"].format(what="checkpoint=no\\-such\\-model")]
    assert at.session_state["ckpt"] != "no-such-model" and at.session_state["text"] == "我爱你。"


def test_the_link_keeps_the_language_and_the_lesson_and_drops_secrets(env):
    at = _open_link("overview", {"lang": "zh", "teacher": "s3cret", "text": "我爱你。", "checkpoint": "tiny-zh-en"})
    link = _link(at)
    assert "s3cret" not in link and "teacher" not in link and "lang=zh" in link
    assert "teacher" not in at.query_params                    # an old teacher link's secret leaves the address bar


def test_the_defaults_are_what_a_fresh_page_shows(env):
    """links.DEFAULTS (left out of links) against the widgets each page starts with."""
    seen = set()
    for page, chosen in [("attention", {}), ("decoding", {}), ("decoding", {"dc_strategy": "sample"}),
                         ("decoding", {"dc_strategy": "beam"}),
                         ("knockout", {}), ("positions", {}), ("patching", {}), ("head_stats", {}),
                         ("architectures", {})]:
        at = open_app(page_file(page))
        for k, v in chosen.items():
            at.session_state[k] = v
        if chosen:
            at.run()
        for key, default in links.DEFAULTS.items():
            template = view_state.KEYS.get(key, {}).get(page)
            if template is None or template.format(kind="translator") in chosen:
                continue
            try:
                value = at.session_state[template.format(kind="translator")]
            except KeyError:
                continue
            assert value == default, (page, key, value)
            seen.add(key)
        if page == "knockout":
            assert all(at.session_state[f"ko_pick_{b}"] == [] for b in view_state.ABLATE_BLOCKS)
            seen.add("ablate")
    assert seen == set(links.DEFAULTS) - {"snapshot", "sentence"}, set(links.DEFAULTS) - seen   # no snapshots here


LONG_TEXT = "今天天气很好，我们去公园散步吧。" * 12          # about 190 characters: far past LONG once URL-encoded


def _param(at, key: str) -> str:
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def _link_box(at):
    """(the link shown in the sidebar's Copy link box or None, the Make the link button or None)."""
    link = next((c.value for c in at.sidebar.code if c.value.startswith("http") or "?" in c.value), None)
    make = next((b for b in at.sidebar.button if b.key == "link_make"), None)
    return link, make


def test_a_long_text_is_stored_only_when_a_link_is_made(env):
    at = _open_link("attention", {"checkpoint": "tiny-zh-en", "layer": "1"})
    at.session_state["text"] = LONG_TEXT
    at.run()
    assert not at.exception and texts.summary()["texts"] == 0           # typed, and read on the page: not stored
    assert "text" not in at.query_params and "tid" not in at.query_params and _param(at, "layer") == "1"
    link, make = _link_box(at)
    assert link is None and make is not None and make.label == EN["link.make"]
    make.click().run()
    link, make = _link_box(at)
    assert make is None and link is not None and texts.summary()["texts"] == 1
    tid = dict(parse_qsl(urlsplit(link).query))["tid"]
    assert _param(at, "tid") == tid and texts.ID.match(tid)
    at.run()
    assert texts.summary()["texts"] == 1                                 # reruns store nothing more
    again = _open_link("attention", dict(parse_qsl(urlsplit(link).query)))   # the link in a fresh session
    assert again.session_state["text"] == LONG_TEXT and again.session_state["at_layer"] == 1
    assert not [i for i in again.info if "link" in i.value.lower()]


def test_an_expired_link_says_so_and_the_page_works(env, monkeypatch):
    tid = texts.put(LONG_TEXT, "browser-a", now=1_700_000_000.0)          # long ago
    at = _open_link("attention", {"checkpoint": "tiny-zh-en", "tid": tid})
    notes = [i.value for i in at.info]
    assert fill(EN["link.expired"], days=30.0) in notes and at.session_state["text"] != LONG_TEXT
    assert at.get("plotly_chart")                                         # the default text's attention is drawn


def test_a_database_that_cannot_store_gives_one_line(env, monkeypatch, tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the data folder should be")
    monkeypatch.setenv("VIZ_DATA", str(blocked))
    db.dispose()
    at = _open_link("overview", {"checkpoint": "tiny-zh-en"})
    at.session_state["text"] = LONG_TEXT
    at.run()
    _link_box(at)[1].click().run()
    assert not at.exception and [e.value for e in at.sidebar.error] == [EN["link.err.unavailable"]]
    assert tables(at)                                                       # the page still shows its tables
