"""The shipped lessons' claims against the shipped checkpoints: every fact a note states holds (a retrained
checkpoint that breaks one fails here), the heads the selectors find are checked by hand against the
captured patterns, the notes fill in both languages and their markdown emphasis renders."""
from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

import pytest
import torch

from app_util import ROOT
from viz_transformer import load_checkpoint
from viz_transformer.analysis import attention_maths, mask_examples
from viz_transformer.analysis import claims
from viz_explorer.lessons import lesson_file
from viz_transformer.run import permute
from viz_transformer.core.masks import causal_mask

SHIPPED = lesson_file.list_lessons()         # every lesson in lessons/
STEPS = [(name, i) for name in SHIPPED for i in range(len(lesson_file.load_lesson(name).steps))]


@lru_cache(maxsize=None)
def model(ckpt: str):
    return load_checkpoint(ROOT / "checkpoints" / ckpt)


@lru_cache(maxsize=None)
def facts(name: str, i: int) -> dict:
    lesson = lesson_file.load_lesson(name)
    ckpt, text = lesson_file.model_and_text(lesson, i)
    spec = lesson.steps[i].facts
    return {k: claims.evaluate(v["kind"], model(ckpt), text, {a: b for a, b in v.items() if a != "kind"})
            for k, v in spec.items()}


@pytest.mark.parametrize("name, i", STEPS)
def test_every_claim_of_every_step_holds_on_the_shipped_checkpoint(name, i):
    got = facts(name, i)
    for key, fact in got.items():
        assert fact.holds, f"{name} step {i + 1}, fact {key!r}: {fact.claim} is false: {fact.values}"
    step = lesson_file.load_lesson(name).steps[i]
    values = {k: f.values for k, f in got.items()}
    lesson_file.step_settings(step, values)                                  # every `use` names a real field
    for lang in lesson_file.LANGS:
        text = lesson_file.fill(step.note[lang], values)
        assert not lesson_file.PLACEHOLDER.search(text) and "{" not in text, text


def _emphasis_renders(text: str) -> bool:
    """CommonMark's flanking rules for * runs (what Streamlit's markdown follows): the k-th run of a
    length opens (left-flanking) when k is even and closes (right-flanking) when odd. Code spans skipped."""
    text = re.sub(r"`[^`]*`", "x", text)
    ws = lambda c: c.isspace()                                                     # noqa: E731
    punct = lambda c: unicodedata.category(c)[0] in "PS"                          # noqa: E731
    seen: dict[int, int] = {}
    for m in re.finditer(r"\*+", text):
        prev = text[m.start() - 1] if m.start() else " "
        nxt = text[m.end()] if m.end() < len(text) else " "
        left = not ws(nxt) and (not punct(nxt) or ws(prev) or punct(prev))
        right = not ws(prev) and (not punct(prev) or ws(nxt) or punct(nxt))
        n = len(m.group())
        k = seen.get(n, 0)
        seen[n] = k + 1
        if not (left if k % 2 == 0 else right):
            return False
    return all(k % 2 == 0 for k in seen.values())


def test_the_emphasis_check_knows_the_cjk_trap():
    assert _emphasis_renders("答案是**位置编码**：每个") and _emphasis_renders("**查询** Q")
    assert not _emphasis_renders("**前缀语言模型（prefix-LM）**的掩码")       # closes after ）, before 的


@pytest.mark.parametrize("name", SHIPPED)
def test_notes_render_their_emphasis_and_name_the_interface_s_own_buttons(name):
    for step in lesson_file.load_lesson(name).steps:
        for lang, text in step.note.items():
            assert _emphasis_renders(text), text
        assert not re.search(r"点 ?Next|Next\b", step.note["zh"])              # the Chinese note names 下一步
    decoding = next(s for s in lesson_file.load_lesson("attention-step-by-step").steps if s.page == "decoding")
    assert "“下一步”" in decoding.note["zh"] and "“课程下一步”" in decoding.note["zh"]
    assert "“Next”" in decoding.note["en"] and "“Next lesson step”" in decoding.note["en"]


# -- the claims checked by hand, against the captured tensors ------------------------------------------
def test_the_cross_attention_head_is_the_one_whose_predicting_row_reads_the_source_word():
    hm = model("zh-en")
    run = hm.run("我是一名工程师。")
    fact = facts("attention-step-by-step", 5)["al"]
    j = run.tgt_pieces.index("▁engineer")                                # the row whose input is ▁engineer ...
    row, cols = j - 1, [run.src_pieces.index(c) for c in "工程师"]        # ... the step that predicts it, 工 程 师
    assert cols == list(range(cols[0], cols[0] + 3))                     # one character a piece, in order
    weights = torch.stack([run.cache[f"decoder.{l}.cross_attn.hook_pattern"][0, :, row, cols].sum(-1)
                           for l in range(hm.cfg.n_decoder_layers)])     # (layer, head): the word's share
    layer, head = fact.values["layer"], fact.values["head"]
    assert weights[layer, head] == weights.max() >= 0.5
    own = run.cache[f"decoder.{layer}.cross_attn.hook_pattern"][0, head, j, cols].sum()
    assert own < 0.5 * weights.max()
    assert fact.values["input"] == run.tgt_pieces[row] and fact.values["strong"] == int((weights >= 0.5).sum())
    step = lesson_file.load_lesson("attention-step-by-step").steps[5]
    settings = lesson_file.step_settings(step, {"al": fact.values})
    assert (settings["layer"], settings["head"]) == (layer, head)


def test_the_lens_step_is_the_step_that_writes_engineer():
    lesson = lesson_file.load_lesson("attention-step-by-step")
    fact = facts("attention-step-by-step", next(i for i, s in enumerate(lesson.steps) if s.page == "lens"))["lf"]
    tr = model("zh-en").run("我是一名工程师。").trace
    assert tr.steps[fact.values["step"] - 1].piece == "▁engineer"


def test_the_pair_is_a_real_reordering_of_pieces():
    tok = model("zh-en").tokenizer
    a, b = (tok.pieces(tok.encode(x)) for x in ("我喜欢你。", "你喜欢我。"))
    assert a == list("我喜欢你。") and b == list("你喜欢我。")                 # one character a piece
    assert [i for i in range(len(a)) if a[i] != b[i]] == [0, 3] and a[0] == b[3] == "我"
    test = permute.order_test(model("zh-en"), "我喜欢你。", "swap", max_new_tokens=1)
    assert test.permuted_pieces == tok.pieces(tok.encode("你喜欢我。")) + ["[end]"]


def test_uniform_entropy_counts_only_the_allowed_keys():
    row = causal_mask(7)[0, 0, 4]                                       # a causal row with 5 allowed keys
    assert attention_maths.uniform_entropy(row) == pytest.approx(math.log(5))
    w = torch.where(row, 1 / 5, 0.0)                                    # uniform over them: the same number
    assert attention_maths.entropy(w) == pytest.approx(attention_maths.uniform_entropy(row))


def test_the_prefix_lm_layout_is_source_sep_target():
    run = model("zh-en").run("我喜欢你。")
    seq, p = mask_examples.prefix_lm_layout(run)
    assert seq[:p] == ["[begin]", *run.src_pieces[:-1], "[sep]"] and seq[p:] == run.tgt_pieces[1:]
    prefix = model("zh-en-prefix").run("我喜欢你。")                 # the real prefix LM: the same shape
    seq2, p2 = mask_examples.prefix_lm_layout(prefix)
    assert seq2[p2 - 1] == "[sep]" and p2 == prefix.prefix_len


def test_lessons_with_facts_round_trip_and_bad_facts_name_the_step():
    lesson = lesson_file.load_lesson("attention-step-by-step")
    assert lesson_file.parse_lesson(__import__("json").loads(lesson.dumps()), lesson.name) == lesson
    bad = {"title": "x", "steps": [{"page": "lens", "note": "{f.x}"}]}
    with pytest.raises(ValueError, match="step 1: the note names"):
        lesson_file.parse_lesson(bad)
    bad["steps"][0]["facts"] = {"f": {"kind": "nonsense"}}
    with pytest.raises(ValueError, match="step 1: fact 'f'"):
        lesson_file.parse_lesson(bad)
    assert lesson_file.fill("{f.x}", {"f": {"x": "*a*"}}) == r"\*a\*"        # model text never becomes markup
