"""Question banks (viz_explorer/classroom/bank.py): the shipped concept checks (every concept the issue names, in
isomorphic pairs, both languages, on real pages, numbers computed from the model) and the one-line refusals of a
broken file."""
from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from viz_explorer.classroom import bank
from viz_explorer.lessons import lesson_file
from viz_transformer import load_checkpoint
from viz_transformer.analysis import claims
from viz_transformer.core.config import ModelConfig

CONCEPTS = {"scaling", "softmax", "causal-mask", "padding-mask", "prefix-mask", "multi-head", "order", "sinusoidal",
            "cross-attention", "norm", "architecture", "bert", "beam", "residual"}


@pytest.fixture(scope="module")
def shipped():
    return bank.load_bank("concept-checks")


def _values(b):
    hm = load_checkpoint(bank.QUESTIONS_DIR.parent / "checkpoints" / b.checkpoint)
    return hm, {k: claims.evaluate(s["kind"], hm, b.text, {x: y for x, y in s.items() if x != "kind"}).values
                for k, s in bank.needs_facts(b).items()}


def test_the_concept_checks_pair_every_concept_in_both_languages(shipped):
    assert len(shipped.questions) >= 24
    assert {q.concept for q in shipped.questions} == CONCEPTS
    assert Counter((q.concept, q.form) for q in shipped.questions) == {(c, f): 1 for c in CONCEPTS for f in "ab"}
    texts = [shipped.title] + [t for q in shipped.questions for t in (q.prompt, q.figure, *q.options)]
    assert all(set(t) == {"en", "zh"} and all(v.strip() for v in t.values()) for t in texts)
    assert all(q.page in lesson_file.PAGES for q in shipped.questions)
    assert Counter(q.answer for q in shipped.questions).most_common(1)[0][1] <= len(shipped.questions) // 2  # spread


def test_numbers_in_the_questions_are_the_models(shipped):
    hm, values = _values(shipped)
    cfg: ModelConfig = hm.cfg
    by_id = {q.id: q for q in shipped.questions}
    prompt, options = bank.filled(shipped, by_id["multi-head-a"], values, "en")
    assert f"d_model = {cfg.d_model}" in prompt and f"{cfg.n_heads} heads" in prompt
    assert options[by_id["multi-head-a"].answer] == str(cfg.d_model // cfg.n_heads)
    prompt, _ = bank.filled(shipped, by_id["scaling-b"], values, "zh")
    assert f"d_k = {cfg.d_model // cfg.n_heads}" in prompt and shipped.checkpoint in prompt
    _, options = bank.filled(shipped, by_id["multi-head-b"], values, "en")     # a typed number, against its formula
    assert options[by_id["multi-head-b"].answer] == str(768 // 12)
    for q in shipped.questions:                           # options stay distinct once filled, in both languages
        for lang in ("en", "zh"):
            _, opts = bank.filled(shipped, q, values, lang)
            assert len(set(opts)) == len(opts) and "{" not in "".join(opts)


def test_class_ids_find_their_question(shipped):
    q = shipped.half("b")[3]
    assert bank.find(shipped.class_id(q)) == (shipped, q)
    assert bank.find("check/concept-checks/nope") is None and bank.find("lesson/3") is None
    assert bank.find("check/../../etc/x") is None


def _broken(tmp_path, monkeypatch, change) -> str:
    data = json.loads((bank.QUESTIONS_DIR / "concept-checks.json").read_text(encoding="utf-8"))
    data = copy.deepcopy(data)
    change(data)
    (tmp_path / "mine.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setenv("VIZ_QUESTIONS", str(tmp_path))
    with pytest.raises(ValueError) as e:
        bank.load_bank("mine")
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_broken_bank_is_refused_in_one_line_naming_the_question(tmp_path, monkeypatch):
    def no_zh(d):
        del d["questions"][2]["options"][1]["zh"]
    assert "'softmax-a': option B has no zh text" in _broken(tmp_path, monkeypatch, no_zh)

    def answer_out(d):
        d["questions"][0]["answer"] = 4
    assert "'scaling-a': answer 4 is not among its options" in _broken(tmp_path, monkeypatch, answer_out)

    def unpaired(d):
        d["questions"] = [q for q in d["questions"] if q["id"] != "beam-b"]
    assert "concept 'beam' has a form-a question but no form-b one" in _broken(tmp_path, monkeypatch, unpaired)

    def no_page(d):
        d["questions"][1]["page"] = "nowhere"
    assert "'scaling-b': page 'nowhere' is not a page" in _broken(tmp_path, monkeypatch, no_page)

    def twice(d):
        d["questions"][1]["id"] = "scaling-a"
    assert "two questions have the id 'scaling-a'" in _broken(tmp_path, monkeypatch, twice)

    def no_fact(d):
        del d["questions"][1]["facts"]
    assert "prints {hs.d_head}, but names no fact 'hs'" in _broken(tmp_path, monkeypatch, no_fact)

    def same(d):
        d["questions"][2]["options"][1] = dict(d["questions"][2]["options"][0])
    assert "two options read the same" in _broken(tmp_path, monkeypatch, same)
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json is not valid JSON"):
        bank.load_bank("bad")
    with pytest.raises(ValueError, match="not a bank name"):
        bank.load_bank("../lessons/x")


def test_a_bank_round_trips_through_its_json(shipped, tmp_path):
    (tmp_path / "again.json").write_text(bank.to_json(shipped), encoding="utf-8")
    again = bank.load_bank("again", tmp_path)
    assert again.questions == shipped.questions and again.title == shipped.title


def test_questions_written_in_the_app_make_a_bank_that_loads(tmp_path):
    from viz_explorer.classroom import bank_writer as bw
    fields = {"concept": "Causal mask!", "form": "a", "page": "masks", "answer": 2,
              "prompt_en": "Which keys may query 2 read?", "prompt_zh": "查询 2 能读哪些键？",
              "figure_en": "the decoder's mask", "figure_zh": "解码器的掩码",
              **{f"opt_en_{j}": e for j, e in enumerate(["0 only", "", "0, 1 and 2", "all"])},
              **{f"opt_zh_{j}": z for j, z in enumerate(["只有 0", "", "0、1 和 2", "全部"])}}
    a = bw.question(fields, 1)
    assert a["id"] == "causal-mask-a" and a["answer"] == 1 and len(a["options"]) == 3      # the empty option left out
    b = bw.question({**fields, "form": "b", "prompt_en": "Which keys may query 4 read?", "prompt_zh": "查询 4 能读哪些键？"}, 2)
    alone = bw.question({**fields, "concept": "", "form": "", "prompt_zh": ""}, 3)              # English only
    assert alone["id"] == "concept-3-3" and set(alone["prompt"]) == {"en"}
    text = bw.bank_text({"en": "Mine", "zh": ""}, [a, b, alone])
    (tmp_path / "mine.json").write_text(text, encoding="utf-8")
    mine = bank.load_bank("mine", tmp_path)
    assert mine.title == {"en": "Mine"} and [q.id for q in mine.half("a")] == ["causal-mask-a"]
    assert mine.questions[0].options[1] == {"en": "0, 1 and 2", "zh": "0、1 和 2"}
    with pytest.raises(ValueError, match="form-a question but no form-b"):
        bw.bank_text({}, [a])
    with pytest.raises(ValueError, match="answer -1 is not among its options"):
        bw.bank_text({}, [bw.question({**fields, "answer": 1}, 4)])      # the right option left empty


def test_a_class_question_is_built_once_and_again_when_its_bank_or_checkpoint_changes(shipped, tmp_path, monkeypatch):
    import os
    import shutil
    from viz_explorer.classroom import checks_view
    from viz_explorer.kit.strings import speaking
    from viz_explorer.server import defaults
    monkeypatch.setenv("VIZ_QUESTIONS", str(tmp_path / "q"))
    (tmp_path / "q").mkdir()
    shutil.copytree(defaults.SHIPPED / shipped.checkpoint, tmp_path / "ck" / shipped.checkpoint)
    monkeypatch.setattr(defaults, "SHIPPED", tmp_path / "ck")
    file = tmp_path / "q" / "mine.json"
    data = json.loads((bank.QUESTIONS_DIR / "concept-checks.json").read_text(encoding="utf-8"))
    file.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    qid = "check/mine/multi-head-a"
    hm, values = _values(shipped)
    check = next(q for q in shipped.questions if q.id == "multi-head-a")
    now = [0.0]
    monkeypatch.setattr(checks_view, "clock", lambda: now[0])
    first = checks_view.as_question(qid)
    assert first.prompt == bank.filled(shipped, check, values, "en")[0]
    assert checks_view.as_question(qid) is first                        # asked again: the same, not rebuilt
    with speaking("zh"):
        assert checks_view.as_question(qid).prompt == bank.filled(shipped, check, values, "zh")[0]
    at = file.stat().st_mtime
    data["questions"][[q["id"] for q in data["questions"]].index("multi-head-a")]["prompt"]["en"] = \
        "Rewritten: d_model = {hs.d_model}, how wide is a head?"
    file.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.utime(file, (at + 5, at + 5))
    assert checks_view.as_question(qid) is first                        # within RECHECK: the files are not read
    now[0] += checks_view.RECHECK
    again = checks_view.as_question(qid)
    assert again.prompt == f"Rewritten: d_model = {hm.cfg.d_model}, how wide is a head?"       # the file changed
    weights = tmp_path / "ck" / shipped.checkpoint / "model.safetensors"
    os.utime(weights, (weights.stat().st_mtime + 5,) * 2)
    now[0] += checks_view.RECHECK
    retrained = checks_view.as_question(qid)
    assert retrained is not again and retrained == again                 # the checkpoint changed: built again
    assert checks_view.as_question("check/mine/nope") is None and checks_view.as_question("lesson/2") is None
