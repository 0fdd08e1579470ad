"""A Llama-style model trained with our code, written as a Hugging Face llama folder (export_hf): transformers
opens it as LlamaForCausalLM with our logits (the independent implementation), load_checkpoint opens it back with
the same logits and the same greedy output, and its tokenizer.json gives our SentencePiece ids."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import make_tiny_checkpoint
from test_rope import ROPE
from viz_transformer import decode, DecodeSettings, load_checkpoint
from viz_transformer.cli import main as cli_main

pytestmark = pytest.mark.slow          # transformers' import and its models: too slow for the fast tier

TEXTS = ["The cat sat on the mat.", "Once upon a time there was a little dog.", "I love you."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    ours = make_tiny_checkpoint(root / "tiny-llama", "decoder_only", seed=3, **ROPE)
    assert cli_main(["export-hf", str(ours), str(root / "hf-llama")]) == 0
    return load_checkpoint(ours), root / "hf-llama"


def test_transformers_opens_it_with_our_logits_and_patterns(exported):
    hm, folder = exported
    ref = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    for text in TEXTS:
        ids = torch.tensor([hm.tokenizer.encode(text)])
        ids = torch.cat([torch.tensor([[hm.cfg.bos_id]]), ids], 1)
        with torch.no_grad():
            theirs = ref(ids, output_attentions=True)
            logits, cache = hm.model.run_with_cache(ids)
        torch.testing.assert_close(theirs.logits, logits, atol=1e-4, rtol=1e-4)
        for i, a in enumerate(theirs.attentions):
            torch.testing.assert_close(a, cache[f"decoder.{i}.self_attn.hook_pattern"], atol=1e-5, rtol=1e-5)


def test_its_tokenizer_gives_our_ids(exported):
    hm, folder = exported
    hf_tok = AutoTokenizer.from_pretrained(folder)
    for text in TEXTS + ["我是一名工程师。", "a  b"]:
        assert hf_tok(text).input_ids == [hm.cfg.bos_id] + hm.tokenizer.encode(text), text


def test_load_checkpoint_opens_it_back(exported):
    hm, folder = exported
    back = load_checkpoint(folder)
    assert back.cfg.positional == "rope" and back.cfg.kv_heads == hm.cfg.kv_heads
    for text in TEXTS:
        ids = torch.tensor([[hm.cfg.bos_id] + hm.tokenizer.encode(text)])
        with torch.no_grad():
            torch.testing.assert_close(back.model(ids), hm.model(ids), atol=1e-5, rtol=1e-5)
        assert decode(back, text, DecodeSettings("greedy", max_new_tokens=6)).output_ids == \
            decode(hm, text, DecodeSettings("greedy", max_new_tokens=6)).output_ids


def test_a_model_without_the_llama_parts_is_refused(tmp_path, capsys):
    plain = make_tiny_checkpoint(tmp_path / "plain", "decoder_only")
    assert cli_main(["export-hf", str(plain), str(tmp_path / "out")]) == 2
    assert "positional='sinusoidal'" in capsys.readouterr().err


def test_nan_or_infinite_weights_are_refused(exported, tmp_path):
    from safetensors.torch import load_file, save_file
    from viz_transformer import CheckpointError
    _, folder = exported
    for bad in (float("nan"), float("inf")):
        copy = tmp_path / f"bad-{bad}"
        copy.mkdir()
        for f in folder.iterdir():
            (copy / f.name).write_bytes(f.read_bytes())
        tensors = load_file(str(folder / "model.safetensors"))
        tensors["model.layers.1.mlp.up_proj.weight"][3, 4] = bad
        save_file(tensors, str(copy / "model.safetensors"))
        with pytest.raises(CheckpointError, match="NaN or infinite"):
            load_checkpoint(copy)
