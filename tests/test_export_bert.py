"""A masked LM trained with our code, written as a Hugging Face bert folder (export_bert): transformers opens it
as BertForMaskedLM with our logits and attention (the independent implementation), its tokenizer.json gives our
ids and segments (a [MASK] among them), and load_checkpoint opens the folder back with the same logits."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

import viz_transformer.training.train as T
from viz_transformer import load_checkpoint
from viz_transformer.cli import main as cli_main

from test_core_train import cpu_only, pairs_tsv  # noqa: F401  (fixtures)
from test_masked_lm import mlm_args

pytestmark = pytest.mark.slow          # transformers' import and its models: too slow for the fast tier

TEXTS = ["我喜欢[MASK]。", "He likes [MASK].", "[MASK] likes tea.", "我们有书。", "She [MASK]s cats",
         "Tom,  don't go!", "café 🍎 über", "我要茶。 [SEP] I want tea."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, pairs_tsv):  # noqa: F811
    root = tmp_path_factory.mktemp("bert")
    assert T.main(mlm_args(pairs_tsv, root, epochs=2) + ["--no-snapshots"]) == 0
    assert cli_main(["export-hf", str(root / "out"), str(root / "hf-bert")]) == 0
    return load_checkpoint(root / "out"), root / "hf-bert"


def test_transformers_opens_it_with_our_logits_and_patterns(exported):
    hm, folder = exported
    ref = AutoModelForMaskedLM.from_pretrained(folder, attn_implementation="eager").eval()
    assert type(ref).__name__ == "BertForMaskedLM"
    for text in TEXTS:
        run = hm.run(text)
        ids = torch.tensor([run.src_ids])
        types = torch.tensor([list(run.input.segments)])
        with torch.no_grad():
            theirs = ref(input_ids=ids, token_type_ids=types, output_attentions=True)
        torch.testing.assert_close(theirs.logits[0], run.logits, atol=1e-4, rtol=1e-4)
        for i, a in enumerate(theirs.attentions):
            torch.testing.assert_close(a, run.cache[f"encoder.{i}.self_attn.hook_pattern"], atol=1e-5, rtol=1e-5)


def test_its_tokenizer_gives_our_ids_and_segments(exported):
    hm, folder = exported
    hf_tok = AutoTokenizer.from_pretrained(folder)
    assert hf_tok.mask_token == "[MASK]" and hf_tok.mask_token_id == hm.tokenizer.mask_id
    for text in TEXTS:
        a, b = hm.tokenizer.split_pair(text)
        enc = hf_tok(a, b) if b is not None else hf_tok(a)
        assert (enc.input_ids, enc.token_type_ids) == hm.tokenizer.encode_pair(a, b), text


def test_load_checkpoint_opens_it_back(exported):
    hm, folder = exported
    back = load_checkpoint(folder)
    assert back.cfg.architecture == "encoder_only" and back.cfg.head == "mlm"
    for text in TEXTS:
        mine, theirs = hm.run(text), back.run(text)
        assert theirs.src_ids == mine.src_ids
        torch.testing.assert_close(theirs.logits, mine.logits, atol=1e-5, rtol=1e-5)


def test_a_translator_is_refused_in_one_line(tmp_path, capsys):
    from conftest import make_tiny_checkpoint
    ck = make_tiny_checkpoint(tmp_path / "tiny")
    assert cli_main(["export-hf", str(ck), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "llama" in err


def test_the_shipped_masked_lm_exports_with_equal_logits(tmp_path):
    from app_util import ROOT
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en-bert")
    assert cli_main(["export-hf", str(ROOT / "checkpoints" / "zh-en-bert"), str(tmp_path / "bert")]) == 0
    ref = AutoModelForMaskedLM.from_pretrained(tmp_path / "bert").eval()
    hf_tok = AutoTokenizer.from_pretrained(tmp_path / "bert")
    for text in ("我是一名工[MASK]师。", "He is my [MASK].", "我是学生。 [SEP] I am a [MASK]."):
        run = hm.run(text)
        a, b = hm.tokenizer.split_pair(text)
        enc = hf_tok(a, b, return_tensors="pt") if b is not None else hf_tok(a, return_tensors="pt")
        assert enc.input_ids[0].tolist() == run.src_ids
        with torch.no_grad():
            theirs = ref(**enc).logits[0]
        torch.testing.assert_close(theirs, run.logits, atol=1e-4, rtol=1e-4)
