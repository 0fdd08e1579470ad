"""The tutorials' walk-through on the shipped zh-en: 我是一名工程师。 → "I'm an engineer." ("I am an engineer."),
one piece a step, each English word read from its Chinese word through cross-attention (我 → I, 是 → am / 'm,
一名 → an, 工程师 → engineer). The alignment is the tutorials' (a known translation), not the code's."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from viz_transformer import load_checkpoint
from viz_transformer.analysis import alignment, claims

ROOT = Path(__file__).resolve().parent.parent
TEXT = "我是一名工程师。"
# (English word, the pieces that may spell it, its Chinese word)
WORDS = [("I", ["▁I"], "我"), ("am", ["▁am", "'", "m"], "是"), ("an", ["▁an"], "一名"),
         ("engineer", ["▁engineer"], "工程师")]


@pytest.fixture(scope="module")
def run():
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en")
    return hm, hm.run(TEXT)


def _cross(hm, run) -> torch.Tensor:
    return torch.stack([run.cache[f"decoder.{l}.cross_attn.hook_pattern"][0]
                        for l in range(hm.cfg.n_decoder_layers)])                       # (layer, head, q, k)


def test_the_sentence_translates_and_is_cut_one_character_a_piece(run):
    hm, r = run
    assert r.output in ("I'm an engineer.", "I am an engineer.")
    assert r.src_pieces == [*TEXT, "[end]"]


@pytest.mark.parametrize("word,pieces,source", WORDS)
def test_each_english_word_has_a_head_that_reads_its_chinese_word(run, word, pieces, source):
    hm, r = run
    cols = [r.src_pieces.index(c) for c in source]                   # one character a piece
    rows = [j - 1 for j, p in enumerate(r.tgt_pieces) if j and p in pieces]   # the steps that write the word
    assert rows, (word, r.tgt_pieces)
    top = _cross(hm, r)[:, :, rows].argmax(-1)                        # (layer, head, row): each head's largest key
    hits = [(l, h) for l in range(top.shape[0]) for h in range(top.shape[1]) if any(int(k) in cols for k in top[l, h])]
    assert hits, (word, source, [[r.src_pieces[int(k)] for k in top[l, h]] for l in range(top.shape[0])
                                  for h in range(top.shape[1])])


def test_the_lesson_s_word_by_word_fact_counts_the_same_heads(run):
    hm, r = run
    pairs = {"▁I": "我", "'": "是", "▁an": "一名", "▁engineer": "工程师"}
    if "'" not in r.tgt_pieces:
        pairs["▁am"] = pairs.pop("'")
    fact = claims.evaluate("word_alignment", hm, TEXT, {"targets": " ".join(pairs), "sources": " ".join(pairs.values())})
    assert fact.holds
    cross = _cross(hm, r)
    for row in fact.values["rows"]:
        j = r.tgt_pieces.index(row["target"])
        cols = [r.src_pieces.index(c) for c in row["source"]]
        top = cross[:, :, j - 1].argmax(-1)                           # (layer, head)
        assert row["heads"] == sum(int(k) in cols for k in top.flatten())
        assert cross[row["layer"], row["head"], j - 1].argmax() in cols


def test_reads_by_piece_counts_every_head_once():
    w = torch.tensor([[[0.1, 0.7, 0.2], [0.6, 0.3, 0.1]], [[0.2, 0.2, 0.6], [0.0, 0.9, 0.1]]])    # (2 layers, 2 heads, 3 keys)
    assert alignment.reads_by_piece(w, ["a", "b", "c"]) == [("b", 2), ("a", 1), ("c", 1)]
    assert alignment.source_span(["▁", "工", "程", "师", "。"], "工程师") == range(1, 4)
    with pytest.raises(ValueError, match="spells"):
        alignment.source_span(["工", "师"], "工程师")


def test_the_library_docs_knock_out_example_says_what_the_model_says(run):
    import re
    from viz_transformer import head_ablation_hooks
    hm, _ = run
    readme = (ROOT / "docs" / "library.md").read_text(encoding="utf-8")
    said = re.search(r'hm\.run\("我是一名工程师。", fwd_hooks=off\)\.output\s+# "(.+?)"', readme).group(1)
    off = head_ablation_hooks([("decoder.1.cross_attn", 3)], mode="zero", cfg=hm.cfg)
    assert "decoder.1.cross_attn\", 3)]" in readme.replace("'", '"')
    assert hm.run(TEXT, fwd_hooks=off).output == said
