"""A corpus of any length: the app refuses one past corpora.MAX_LINES in one line (the command line reads any length);
the command line reads its --corpus a chunk at a time (never the whole file at once) and writes what one pass over
the whole corpus gives: head statistics combined to float rounding, attribution's rows numbered on."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from app_util import by_key, open_app, texts
from viz_transformer import cli_corpus, load_checkpoint
from viz_transformer.analysis.attribution import corpus_taus
from viz_transformer.analysis.summaries import STATS, corpus_head_stats
from viz_transformer.cli import main as cli_main
from viz_transformer.training import corpora

SENTENCES = corpora.load("zh")


def test_a_file_is_read_a_chunk_at_a_time_however_long(tmp_path):
    f = tmp_path / "million.txt"
    f.write_text("我是学生。\n\n" * 1_000_000, encoding="utf-8")          # a million sentences, blank lines between
    assert corpora.count(f) == 1_000_000
    parts = corpora.chunks(f, 4096)
    first = next(parts)
    assert first == (0, ["我是学生。"] * 4096)                              # a generator: nothing more read yet
    sizes = [len(c) for _, c in parts]
    assert sum(sizes) + 4096 == 1_000_000 and max(sizes) == 4096
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no sentences"):
        list(corpora.chunks(tmp_path / "blank.txt"))


def test_the_app_holds_at_most_max_lines_and_says_so(monkeypatch):
    with pytest.raises(corpora.TooLong, match="5,001 sentences; at most 5,000"):
        corpora.parse("我。\n" * (corpora.MAX_LINES + 1))
    assert len(corpora.parse("我。\n" * corpora.MAX_LINES)) == corpora.MAX_LINES
    monkeypatch.setattr(corpora, "MAX_LINES", 3)                       # the page reads the limit where it lives
    for page, prefix in (("viz_explorer/pages/experiment/head_stats.py", "hs"),
                         ("viz_explorer/pages/experiment/attribution.py", "ab")):
        for lang, said in (("en", "This corpus has 4 sentences; a corpus here holds at most 3."),
                           ("zh", "这个语料有 4 句；这里的语料最多 3 句。")):
            at = open_app(page, lang=lang)
            by_key(at.segmented_control, f"{prefix}_source").set_value("own").run()
            by_key(at.text_area, f"{prefix}_paste").input("\n".join(SENTENCES[:4])).run()
            errors = [e.value for e in at.error]
            assert len(errors) == 1 and said in errors[0] and not [b for b in at.button if b.key == f"{prefix}_run"]


def test_the_command_line_reads_its_corpus_in_chunks_and_writes_the_whole_corpus(ckpt_root, tmp_path, monkeypatch):
    monkeypatch.setattr(cli_corpus, "CHUNK", 32)                       # 100 sentences: chunks of 32, 32, 32, 4
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES[:100]), encoding="utf-8")
    ckpt = str(ckpt_root / "tiny-zh-en")
    hm = load_checkpoint(ckpt)
    assert cli_main(["stats", "--checkpoint", ckpt, "--corpus", str(corpus), "--out", str(tmp_path / "s.csv"),
                     "--quiet"]) == 0
    got, whole = pd.read_csv(tmp_path / "s.csv"), corpus_head_stats(hm, SENTENCES[:100])
    np.testing.assert_allclose(got[list(STATS)].to_numpy(), whole[list(STATS)].to_numpy(), rtol=1e-9, atol=1e-12)
    assert (got["n_sentences"] == 100).all()
    small = tmp_path / "small.txt"
    small.write_text("\n".join(SENTENCES[:40]), encoding="utf-8")
    assert cli_main(["attribution", "--checkpoint", ckpt, "--corpus", str(small), "--out", str(tmp_path / "a.csv"),
                     "--max-steps", "1", "--quiet"]) == 0
    rows = pd.read_csv(tmp_path / "a.csv", encoding="utf-8-sig")
    pd.testing.assert_frame_equal(rows, corpus_taus(hm, SENTENCES[:40], max_steps=1, per_layer=True),
                                  check_dtype=False)
    assert sorted(rows["sentence"].unique()) == list(range(40))


def test_an_attribution_run_that_fails_keeps_nothing(ckpt_root, tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes("我是学生。\n".encode("utf-8") * 3 + b"\xff\xfe broken\n")       # fails in the first chunk's read
    out = tmp_path / "taus.csv"
    assert cli_main(["attribution", "--checkpoint", str(ckpt_root / "tiny-zh-en"), "--corpus", str(bad),
                     "--out", str(out), "--quiet"]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob("*.partial"))
