"""The command line on an encoder-only model (a tiny random BERT saved by transformers, tests/hf_bert_util.py):
`generate` and `translate` refuse in one line (it generates nothing); `trace`, `report` and `stats` work on it,
the report's rollout is the encoder's and stats' rows are the encoder's heads."""
from __future__ import annotations

import csv

import numpy as np
import pytest

import hf_bert_util as B
from viz_transformer import load_checkpoint
from viz_transformer.cli import main

pytestmark = pytest.mark.slow          # transformers builds the model folder

TEXT = f"{B.PAIR[0]} [SEP] {B.PAIR[1]}"


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return B.build(B.SHAPE_BY_ID["bert-mlm"], tmp_path_factory.mktemp("bert") / "tiny-bert")


@pytest.mark.parametrize("command", ["generate", "translate"])
def test_generating_commands_refuse_in_one_line(bert, command, capsys):
    assert main([command, "--checkpoint", str(bert), "--text", "Hello"]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "encoder-only model (BERT)" in err and "generates nothing" in err


def test_trace_report_and_stats_run(bert, tmp_path):
    run = load_checkpoint(bert).run(TEXT)
    assert main(["trace", "--checkpoint", str(bert), "--text", TEXT, "--out", str(tmp_path / "t.npz")]) == 0
    with np.load(tmp_path / "t.npz", allow_pickle=False) as z:
        assert np.allclose(z["encoder.1.self_attn.hook_pattern"], run.cache["encoder.1.self_attn.hook_pattern"].numpy())
    assert main(["report", "--checkpoint", str(bert), "--text", TEXT, "--out", str(tmp_path / "r.html")]) == 0
    assert "Attention rollout of the encoder" in (tmp_path / "r.html").read_text(encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(B.TEXTS[:6]), encoding="utf-8")
    assert main(["stats", "--checkpoint", str(bert), "--corpus", str(corpus), "--out", str(tmp_path / "s.csv"),
                 "--quiet"]) == 0
    with open(tmp_path / "s.csv", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert {r["block"] for r in rows} == {"encoder.self_attn"} and len(rows) == 2 * 3
    assert all(r["n_sentences"] == "6" for r in rows)
