"""core.folders: one door for a model folder. Each kind opens as itself, check() lists it without reading its
weights, weights() gives exactly the file's numbers in our names, and a broken folder fails in one line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from viz_transformer import CheckpointError
from viz_transformer.core import checkpoint as ck
from viz_transformer.core import hf_import as hf
from viz_transformer.core.folders import HFFolder, OurFolder, SentenceTransformersFolder, open_folder

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "zh-en"


def _no_weights(monkeypatch):
    """Any read of a weights file fails the test: check() reads headers only."""
    fail = lambda *a, **k: pytest.fail("check() read the weights")          # noqa: E731
    monkeypatch.setattr(ck, "read_weights", fail)
    monkeypatch.setattr(ck, "load_bytes", fail)
    monkeypatch.setattr(hf, "hf_weights", fail)
    monkeypatch.setattr(hf, "safe_open", fail)


def test_our_folder_is_checked_without_its_weights_and_gives_the_files_numbers(monkeypatch):
    folder = open_folder(SHIPPED)
    assert isinstance(folder, OurFolder) and folder.kind == "ours" and folder.files == SHIPPED
    with monkeypatch.context() as m:
        _no_weights(m)
        folder.check(SHIPPED.parent)
    assert folder.config == ck.read_config_json(SHIPPED)
    assert folder.meta == json.loads((SHIPPED / "meta.json").read_text(encoding="utf-8"))
    stored = load_file(str(SHIPPED / "model.safetensors"))                 # the file as safetensors reads it
    got = folder.weights()
    assert got.keys() == stored.keys()
    assert all(got[k].dtype == torch.float32 and torch.equal(got[k], stored[k].float()) for k in stored)
    model = folder.model()
    assert not model.training and model.lm_head.weight is model.dec_embed.W_E.weight      # tied, as trained
    assert torch.equal(model.lm_head.weight, stored["src_embed.W_E.weight"].float())
    assert folder.tokenizer().vocab_size == folder.config.vocab_size


@pytest.mark.parametrize("break_it,message", [
    (lambda f: shutil.rmtree(f), "does not exist"),
    (lambda f: (f / "tokenizer.model").unlink(), "missing tokenizer.model"),
    (lambda f: (f / "config.json").write_text("{", encoding="utf-8"), "not valid JSON"),
    (lambda f: (f / "model.safetensors").write_bytes(b"\x80\x04junk"), "truncated or corrupt"),
], ids=["gone", "no-tokenizer", "bad-config", "bad-weights"])
def test_a_broken_folder_fails_its_check_in_one_line(tmp_path, break_it, message):
    folder = tmp_path / "broken"
    shutil.copytree(SHIPPED, folder)
    break_it(folder)
    with pytest.raises(CheckpointError, match=message) as e:
        open_folder(folder).check(tmp_path)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_hugging_face_and_sentence_transformers_folders_open_as_themselves(tmp_path, monkeypatch):
    import hf_util as H
    src = H.build(H.SHAPE_BY_ID["gpt2-3heads-tied"], tmp_path / "gpt2")
    folder = open_folder(src)
    assert type(folder) is HFFolder and folder.kind == "Hugging Face" and folder.meta["model_type"] == "gpt2"
    with monkeypatch.context() as m:
        _no_weights(m)
        folder.check(tmp_path)
    stored = load_file(str(src / "model.safetensors"))
    got = folder.weights()
    assert torch.equal(got["embed.W_E.weight"], stored["transformer.wte.weight"].float())
    assert torch.equal(got["decoder.0.self_attn.W_O.weight"], stored["transformer.h.0.attn.c_proj.weight"].float().t())
    model = folder.model()
    assert model.lm_head.weight is model.embed.W_E.weight

    st = tmp_path / "st"
    shutil.copytree(src, st / "0_Transformer")
    (st / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (st / "1_Pooling").mkdir()
    (st / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    folder = open_folder(st)
    assert type(folder) is SentenceTransformersFolder and folder.path == st and folder.files == st / "0_Transformer"
    folder.check(tmp_path)
    assert folder.config == open_folder(src).config
    with pytest.raises(CheckpointError, match="1_Pooling is a module of the sentence-transformers model"):
        open_folder(st / "1_Pooling")
