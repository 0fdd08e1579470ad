"""Lessons: the file format (checked, round-tripped), lesson mode in the app (?lesson=NAME, Back/Next,
back to the lesson, save as lesson step), the lens and patching pages, and one model run per step
however many students open it."""
from __future__ import annotations

import json
import random
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from app_util import APP, ROOT, array, by_key, figure, open_app, open_tab, texts
from viz_explorer.kit.strings import EN
from viz_transformer.run import capture
from viz_explorer.lessons import lesson_file

N = len(lesson_file.load_lesson("attention-step-by-step").steps)      # its steps, as the panel counts them

SHIPPED = lesson_file.list_lessons()         # every lesson in lessons/


@pytest.fixture(scope="module")
def both_root(ckpt_root, tmp_path_factory):
    """The shipped checkpoints (the lessons name them) and the tiny ones, side by side (copies: a link out
    of the checkpoints folder is refused)."""
    root = tmp_path_factory.mktemp("both")
    for folder in [*ckpt_root.iterdir(), *(ROOT / "checkpoints").iterdir()]:
        if folder.is_dir():
            shutil.copytree(folder, root / folder.name)
    return root


@pytest.fixture(autouse=True)
def env(both_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(both_root))


def test_shipped_lessons_load_and_round_trip():
    assert set(SHIPPED) <= set(lesson_file.list_lessons())
    for name in SHIPPED:
        lesson = lesson_file.load_lesson(name)
        assert len(lesson.steps) >= 5 and set(lesson.title) == {"en", "zh"} and set(lesson.chapter) == {"en", "zh"}
        assert all(set(s.note) == {"en", "zh"} and s.page in lesson_file.PAGES for s in lesson.steps)
        again = lesson_file.parse_lesson(json.loads(lesson.dumps()), name)
        assert again == lesson


@pytest.mark.parametrize("data, match", [
    ({"title": "x", "steps": []}, "non-empty list of steps"),
    ({"title": "x", "steps": [{"page": "nowhere"}]}, "step 1: page 'nowhere'"),
    ({"title": "x", "steps": [{"page": "lens", "note": "n"}, {"page": "attention", "settings": {"layr": 1}, "note": "n"}]},
     "step 2: unknown setting 'layr'"),
    ({"title": "x", "steps": [{"page": "attention", "settings": {"layer": "1"}, "note": "n"}]}, "'layer' is '1'"),
    ({"title": "x", "steps": [{"page": "knockout", "settings": {"ablate": [["decoder.1.cross_attn"]]}, "note": "n"}]},
     "'ablate'"),
    ({"title": "x", "steps": [{"page": "lens", "note": {"fr": "n"}}]}, "note must be text in en and/or zh"),
])
def test_bad_lessons_name_the_step_and_the_field(data, match):
    with pytest.raises(ValueError, match=match):
        lesson_file.parse_lesson(data, "bad")


def test_lesson_names_are_checked(tmp_path):
    with pytest.raises(ValueError, match="not a lesson name"):
        lesson_file.load_lesson("../etc/passwd")
    with pytest.raises(ValueError, match="no lesson 'missing'"):
        lesson_file.load_lesson("missing", tmp_path)
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        lesson_file.load_lesson("broken", tmp_path)


# -- the app ------------------------------------------------------------------------------------------
def open_lesson(name: str, step: int | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lesson"] = name
    if step is not None:
        at.query_params["step"] = str(step)
    at.run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _next(at) -> None:
    by_key(at.button, "ls_next").click()
    at.run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]


def test_a_lesson_walks_its_steps_and_restores_a_step():
    at = open_lesson("attention-step-by-step")
    assert f"Step 1 of {N}" in texts(at) and at.title[0].value == "Overview"
    assert at.session_state["ckpt"] == "zh-en" and at.session_state["text"] == "我是一名工程师。"
    assert by_key(at.button, "ls_back").disabled
    _next(at)                                          # step 2: the step-by-step page, encoder head 0
    assert at.title[0].value == "Attention step by step" and f"Step 2 of {N}" in texts(at)
    assert at.session_state["st_block"] == "encoder.self_attn" and at.session_state["st_layer"] == 0
    shown = dict(at.query_params)             # lesson mode's keys, and the view's own settings (viz_explorer/lessons/links.py)
    assert {k: shown[k] for k in ("lesson", "step", "block", "layer")} == {
        "lesson": "attention-step-by-step", "step": "2", "block": "encoder.self_attn", "layer": "0"}
    by_key(at.selectbox, "st_layer").set_value(2).run(timeout=120)         # the student explores
    by_key(at.selectbox, "st_head").set_value(5).run(timeout=120)
    assert at.session_state["st_layer"] == 2
    by_key(at.button, "ls_restore").click().run(timeout=120)                 # back to the lesson
    assert at.session_state["st_layer"] == 0 and at.session_state["st_head"] == 0
    by_key(at.button, "ls_back").click().run(timeout=120)
    assert at.title[0].value == "Overview" and f"Step 1 of {N}" in texts(at)


def test_the_lesson_stands_on_top_of_the_page_not_in_the_sidebar():
    at = open_lesson("attention-step-by-step", step=2)
    panel = next(e for e in at.main.expander if e.label.startswith("Lesson: Attention step by step"))
    assert f"Step 2 of {N}" in [c.value for c in panel.caption]
    assert {b.key for b in panel.button} >= {"ls_back", "ls_next", "ls_restore", "ls_leave"}
    assert any("**query**" in m.value for m in panel.markdown)                  # the step's note
    assert not [c.value for c in at.sidebar.caption if f"of {N}" in c.value]
    assert not [b.key for b in at.sidebar.button if b.key and b.key.startswith("ls_") and b.key != "ls_save"]


def test_a_step_opens_from_the_link_and_the_note_is_in_the_interface_s_language():
    at = open_lesson("positions-and-masks", step=5)
    assert at.title[0].value.startswith("Activation patching") and "Step 5 of 7" in texts(at)
    shown = texts(at)
    assert "**Activation patching**" in shown and "激活修补" not in shown          # the note once, in English
    assert at.session_state["pt_over"] == "resid"
    figure(at, "residual stream at one position")


def test_a_bad_lesson_link_says_why():
    at = open_lesson("no-such-lesson")
    assert "This lesson cannot be opened" in texts(at) and "attention-step-by-step" in texts(at)


def test_save_as_lesson_step_builds_a_lesson_file():
    at = open_app("viz_explorer/pages/look/attention.py", ckpt="tiny-zh-en")
    by_key(at.selectbox, "at_block").set_value("decoder.cross_attn").run(timeout=60)
    by_key(at.selectbox, "at_layer").set_value(1).run(timeout=60)
    by_key(at.text_input, "ls_note_en").input("Cross-attention lines up the words.").run(timeout=60)
    by_key(at.button, "ls_save").click().run(timeout=60)
    at.switch_page("viz_explorer/pages/experiment/knockout.py").run(timeout=60)
    by_key(at.button, "ko_all_decoder.cross_attn_0").click().run(timeout=60)         # knock out layer 0's heads
    by_key(at.button, "ls_save").click().run(timeout=60)
    draft = at.session_state["lesson_draft"]
    lesson = lesson_file.parse_lesson({"title": "t", "steps": draft})             # what the download holds
    first, second = lesson.steps
    assert first.page == "attention" and first.note == {"en": "Cross-attention lines up the words."}
    assert first.settings["block"] == "decoder.cross_attn" and first.settings["layer"] == 1
    assert first.settings["checkpoint"] == "tiny-zh-en" and first.settings["text"] == "我是一名工程师。"
    assert second.page == "knockout"
    assert sorted(second.settings["ablate"]) == [["decoder.0.cross_attn", h] for h in range(4)]
    assert not at.exception


def test_every_student_on_a_step_costs_one_run(monkeypatch, tmp_path):
    """A class opening the same link: the model runs once per distinct text, not once per student."""
    text = f"我是学生{random.randrange(10**9)}。"                                  # no other test cached it
    (tmp_path / "class.json").write_text(json.dumps({"title": "class", "steps": [
        {"page": "lens", "settings": {"checkpoint": "zh-en", "text": text}, "note": "n"}]}), encoding="utf-8")
    monkeypatch.setenv("VIZ_LESSONS", str(tmp_path))
    calls = []
    real = capture.HookedModel.run
    monkeypatch.setattr(capture.HookedModel, "run", lambda self, t, *a, **k: calls.append(t) or real(self, t, *a, **k))
    for _ in range(4):
        at = open_lesson("class")
        assert at.title[0].value.startswith("Logit lens")
    assert calls.count(text) == 1, calls


@pytest.mark.slow          # two pages × four checkpoints
def test_lens_and_patching_pages_for_each_architecture():
    for ckpt, text, other in [("tiny-zh-en", "我是学生。", None), ("tiny-lm", "The cat sat.", None),
                              ("tiny-prefix", "I love you.", None), ("zh-en", "我爱你。", "你爱我。")]:
        at = open_app("viz_explorer/pages/step/logit_lens.py", ckpt=ckpt, text=text)
        fig = figure(at, "Logit lens")
        n_rows = at.session_state["_viz_ctx"].hm.cfg.n_decoder_layers + 1
        assert len(fig["data"][0]["y"]) == n_rows
        run = at.session_state["_viz_ctx"].run
        assert len(fig["data"][0]["x"]) == min(20, len(run.tgt_ids))     # a window of positions when long
        assert any("→" in x and str(run.prompt_len - 1) in x for x in fig["data"][0]["x"])   # step 1 is shown
        assert len(at.dataframe[0].value) == n_rows                    # the marked step, row by row
        at.switch_page("viz_explorer/pages/experiment/patching.py").run(timeout=60)
        assert not at.exception, [e.value for e in at.exception]
        if other:
            figure(at, "score of patching each head")
            by_key(at.button_group, "pt_over").set_value("resid").run(timeout=60)
            figure(at, "encoder residual stream")
    at = open_app("viz_explorer/pages/experiment/patching.py", ckpt="zh-en", text="我喜欢你。")
    tok = at.session_state["_viz_ctx"].hm.tokenizer
    assert len(tok.encode("我喜欢你。")) != len(tok.encode("我们明天去北京开会。"))      # a pair that cannot be patched
    by_key(at.text_input, "pt_text_translator").input("我们明天去北京开会。").run(timeout=60)
    assert "same number of pieces" in texts(at)


def test_the_step_through_page_reads_each_step_with_the_lens():
    at = open_app("viz_explorer/pages/step/decoding.py", ckpt="zh-en", text="我是一名工程师。")
    by_key(at.button, "dc_next").click().run(timeout=60)
    by_key(at.button, "dc_next").click().run(timeout=60)
    fig = figure(at, "Step 2: what each layer predicts")
    chosen = at.session_state["_viz_ctx"].run.trace.steps[1].piece
    assert fig["data"][0]["text"][-1] == [chosen]            # the top row ranks greedy's choice first


# -- what the lessons' steps show, computed from the model ---------------------------------------------
def test_a_step_s_head_and_numbers_come_from_the_model():
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import claims
    fact = claims.evaluate("cross_alignment", load_checkpoint(ROOT / "checkpoints" / "zh-en"), "我是一名工程师。",
                           {"predicts": "▁engineer", "source": "工程师"})
    at = open_lesson("attention-step-by-step", step=6)
    assert at.title[0].value.startswith("Attention")
    assert (at.session_state["at_layer"], at.session_state["at_head"]) == (fact.values["layer"], fact.values["head"])
    shown = texts(at)
    assert f"(layer {fact.values['layer']}, head {fact.values['head']})" in shown
    assert f"{fact.values['weight']:.2f}" in shown and f"{fact.values['own']:.2f}" in shown
    assert "{al." not in shown and "does not hold" not in shown
    assert by_key(at.button, "ls_next").label == "Next lesson step"


def test_the_chinese_lesson_shows_its_note_first_and_its_own_button_names():
    at = AppTest.from_file(APP, default_timeout=120)
    decoding = next(i for i, s in enumerate(lesson_file.load_lesson("attention-step-by-step").steps) if s.page == "decoding")
    at.query_params.update({"lesson": "attention-step-by-step", "step": str(decoding + 1), "lang": "zh"})
    at.run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    notes = [m.value for m in at.main.markdown if "“下一步”" in m.value or "“Next”" in m.value]
    assert notes and "“课程下一步”" in notes[0]                              # the interface's language ...
    assert not any("“Next”" in n for n in notes)                            # ... only
    assert by_key(at.button, "ls_next").label == "课程下一步" and by_key(at.button, "ls_back").label == "课程上一步"


def test_the_prefix_lm_example_is_the_source_then_sep_then_the_target():
    at = open_app("viz_explorer/pages/look/masks.py", ckpt="zh-en", text="我喜欢你。")
    open_tab(at, "mk", "causal")
    run = at.session_state["_viz_ctx"].run
    p = len(run.src_pieces) - 1 + 2                                     # [begin] + source (no [end]) + [sep]
    fig = figure(at, f"Prefix-LM mask, prefix = {p} tokens")
    labels = [x.split(":", 1)[1] for x in fig["data"][0]["x"]]
    assert labels == ["[begin]", *run.src_pieces[:-1], "[sep]", *run.tgt_pieces[1:]]
    z = array(fig["data"][0]["z"])
    assert (z[:p, :p] == 1).all() and (z[p - 1, p:] == 0).all() and z[p, p] == 1 and z[p, p + 1] == 0
    assert "[begin] + source + [sep] + translation" in texts(at)


def test_the_patching_table_names_a_stream_as_the_figure_does():
    at = open_app("viz_explorer/pages/experiment/patching.py", ckpt="zh-en", text="我喜欢你。")
    assert at.session_state["pt_text_translator"] == "你喜欢我。"
    by_key(at.button_group, "pt_over").set_value("resid").run(timeout=60)
    fig = figure(at, "residual stream")
    rows, cols, z = list(fig["data"][0]["y"]), list(fig["data"][0]["x"]), array(fig["data"][0]["z"])
    assert rows[0] == "embeddings" and rows[-1] == f"after layer {len(rows) - 2}"
    table = at.dataframe[-1].value                                     # the components that restore most
    layer, pos, score = EN["ko.col.layer"], EN["pt.col.pos"], EN["pt.col.score"]     # the table's own headers
    for _, r in table.iterrows():
        assert r[layer] in rows
        assert z[rows.index(r[layer]), int(r[pos])] == pytest.approx(r[score], abs=1e-4)


def test_the_entropy_reference_counts_the_row_s_allowed_keys():
    import math
    at = open_app("viz_explorer/pages/step/step_by_step.py", ckpt="zh-en", text="我是一名工程师。")
    by_key(at.selectbox, "st_block").set_value("decoder.self_attn").run(timeout=60)
    at.session_state["st_row"] = 4
    open_tab(at, "st", "output")
    label = at.metric[0].label
    assert f"{math.log(5):.2f} = uniform over its allowed keys" in label, label
