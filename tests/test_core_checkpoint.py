"""Checkpoint folders: round trips give the same logits, every broken file gives an error that
names it, list_checkpoints reports broken folders, and loading never unpickles."""
from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from core_util import perturb
from viz_transformer import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import Transformer
from viz_transformer.core.tokenizer import Tokenizer

META = {"task": "test", "data": "tests", "metrics": {"bleu": 1.5}, "note": "中文"}


def build(tok, architecture="encoder_decoder", **over):
    torch.manual_seed(0)
    kw = dict(vocab_size=tok.vocab_size, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=2,
              d_ff=32, dropout=0.0, max_len=32, architecture=architecture)
    if architecture != "encoder_decoder":
        kw["n_encoder_layers"] = 0
    kw.update(over)
    return perturb(Transformer(ModelConfig(**kw))).eval()


def logits(model):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, model.cfg.vocab_size, (2, 6), generator=g)
    with torch.no_grad():
        if model.cfg.is_encoder_decoder:
            return model(ids, torch.randint(4, model.cfg.vocab_size, (2, 5), generator=g))
        return model(ids)


@pytest.mark.parametrize("architecture,over", [("encoder_decoder", {}),
                                               ("encoder_decoder", {"tie_embeddings": False, "positional": "learned"}),
                                               ("decoder_only", {"norm": "post"}), ("prefix_lm", {})])
def test_round_trip_gives_identical_logits(tmp_path, tiny_translator, architecture, over):
    tok = tiny_translator.tokenizer
    model = build(tok, architecture, **over)
    folder = save_checkpoint(tmp_path / "ck", model, tok, META, fp16=False)
    hm = load_checkpoint(folder)
    assert hm.cfg == model.cfg
    assert {k: v for k, v in hm.meta.items() if k != "weights_sha256"} == META
    assert torch.equal(logits(hm.model), logits(model))
    assert hm.tokenizer.encode("我是学生。") == tok.encode("我是学生。")
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert ("lm_head.weight" in keys) == (not model.cfg.tie_embeddings)   # tied weights stored once
    if model.cfg.tie_embeddings:
        assert hm.model.lm_head.weight is hm.model.dec_embed.W_E.weight


def test_fp16_round_trip_gives_close_logits(tmp_path, tiny_translator):
    tok = tiny_translator.tokenizer
    model = build(tok)
    folder = save_checkpoint(tmp_path / "ck", model, tok, META, fp16=True)
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert all(f.get_tensor(k).dtype == torch.float16 for k in f.keys())
    hm = load_checkpoint(folder)
    assert next(hm.model.parameters()).dtype == torch.float32
    a, b = logits(hm.model), logits(model)
    assert not torch.equal(a, b)
    torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)


# -- broken folders -----------------------------------------------------------------------------
@pytest.fixture
def good(tmp_path, ckpt_root):
    return shutil.copytree(ckpt_root / "tiny-zh-en", tmp_path / "ck")


def edit_config(folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


def expect_error(folder, *fragments):
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(folder)
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))
    return str(info.value)


def test_missing_folder(tmp_path):
    expect_error(tmp_path / "nowhere", str(tmp_path / "nowhere"), "does not exist")


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.model", "meta.json"])
def test_each_missing_file_is_named(good, name):
    (good / name).unlink()
    msg = expect_error(good, name, "missing")
    assert all(other not in msg for other in ("config.json", "model.safetensors", "tokenizer.model", "meta.json")
               if other != name)


def test_invalid_json_config(good):
    (good / "config.json").write_text('{"d_model": 32,')
    expect_error(good, "config.json", "not valid JSON")


def test_config_that_is_not_an_object(good):
    (good / "config.json").write_text("[1, 2]")
    expect_error(good, "config.json")


def test_unknown_config_key(good):
    edit_config(good, colour="blue")
    expect_error(good, "config.json", "colour")


def test_invalid_config_value(good):
    edit_config(good, n_heads=5)
    expect_error(good, "config.json", "divisible")


@pytest.mark.parametrize("key,value", [("d_model", 32.0), ("max_len", 64.5), ("dropout", "0"), ("vocab_size", None)])
def test_config_value_of_the_wrong_type(good, key, value):
    edit_config(good, **{key: value})
    expect_error(good, "config.json", key)


def test_truncated_weights(good):
    data = (good / "model.safetensors").read_bytes()
    (good / "model.safetensors").write_bytes(data[: len(data) // 2])
    expect_error(good, "model.safetensors")


def test_garbage_weights(good):
    (good / "model.safetensors").write_bytes(b"\x00not a safetensors file" * 10)
    expect_error(good, "model.safetensors")


def test_weights_not_matching_config(good):
    edit_config(good, d_model=64)                       # still valid with 4 heads, but the shapes differ
    expect_error(good, "model.safetensors", "config.json", "shape")


@pytest.mark.parametrize("layers,word", [(3, "missing"), (1, "unexpected")])
def test_weights_with_too_few_or_too_many_layers(good, layers, word):
    edit_config(good, n_decoder_layers=layers)
    expect_error(good, "model.safetensors", word)


@pytest.mark.parametrize("how", ["garbage", "truncated", "empty"])
def test_corrupt_tokenizer(good, how):
    data = (good / "tokenizer.model").read_bytes()
    data = {"garbage": b"\xffnot a sentencepiece model" * 20, "truncated": data[: len(data) // 3], "empty": b""}[how]
    (good / "tokenizer.model").write_bytes(data)
    expect_error(good, "tokenizer.model")


def test_tokenizer_vocab_size_mismatch(good):
    other = Tokenizer.train(["a tiny corpus with few words", "another line of it"] * 10, vocab_size=280,
                            hard_vocab_limit=False)
    cfg = json.loads((good / "config.json").read_text())
    assert other.vocab_size != cfg["vocab_size"]
    other.save(good / "tokenizer.model")
    expect_error(good, "tokenizer.model", str(other.vocab_size), str(cfg["vocab_size"]))


def test_invalid_meta(good):
    (good / "meta.json").write_text("not json")
    expect_error(good, "meta.json")


def test_list_checkpoints_reports_broken_folders(tmp_path, ckpt_root):
    root = tmp_path / "checkpoints"
    shutil.copytree(ckpt_root / "tiny-zh-en", root / "b-good")
    shutil.copytree(ckpt_root / "tiny-lm", root / "a-broken")
    (root / "a-broken" / "tokenizer.model").unlink()
    shutil.copytree(ckpt_root / "tiny-lm", root / "c-badjson")
    (root / "c-badjson" / "config.json").write_text("{")
    (root / "notes.txt").write_text("not a folder")
    infos = list_checkpoints(root)
    assert [i.name for i in infos] == ["a-broken", "b-good", "c-badjson"]
    broken, good, badjson = infos
    assert good.error is None and good.config.architecture == "encoder_decoder" and good.meta["task"] == "test"
    assert "tokenizer.model" in broken.error and broken.config is None
    assert "config.json" in badjson.error
    assert list_checkpoints(tmp_path / "nothing-here") == []


def test_loading_never_unpickles(monkeypatch, ckpt_root):
    def refuse(*a, **k):
        raise AssertionError("something tried to unpickle")

    class Refuse(pickle.Unpickler):
        def load(self):
            refuse()
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", Refuse)
    monkeypatch.setattr(torch, "load", refuse)
    for name in ("tiny-zh-en", "tiny-lm"):
        hm = load_checkpoint(ckpt_root / name)
        assert torch.isfinite(logits(hm.model)).all()


# -- the meta-device reference (shapes checked before any weight is read) ----------------------------
@pytest.mark.parametrize("architecture,positional", [("encoder_decoder", "sinusoidal"), ("decoder_only", "learned"),
                                                     ("prefix_lm", "sinusoidal")])
def test_meta_reference_has_the_real_models_names_shapes_and_size(architecture, positional):
    from viz_transformer.core.checkpoint import meta_reference, model_bytes, n_parameters
    cfg = ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_encoder_layers=1 if architecture == "encoder_decoder" else 0,
                      n_decoder_layers=2, d_ff=32, max_len=32, architecture=architecture, positional=positional)
    real = Transformer(cfg)                                       # the reference: built on the CPU for real
    ref = meta_reference(cfg)
    assert {k: v.shape for k, v in ref.state_dict().items()} == {k: v.shape for k, v in real.state_dict().items()}
    assert all(p.is_meta for p in ref.parameters())
    n = sum(t.numel() for t in real.parameters()) + sum(t.numel() for t in real.buffers())
    assert model_bytes(cfg) == 4 * n
    assert n_parameters(cfg) == sum(p.numel() for p in real.parameters())     # tied weights once, as torch counts


def test_the_kept_meta_references_follow_every_field_of_the_config():
    """meta_reference keeps a few meta models, by config: configs one field apart (more than it keeps, then the first
    again) each get the shapes of their own model built for real, and a second ask returns the kept one."""
    from viz_transformer.core import checkpoint as ck
    base = dict(vocab_size=50, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, max_len=32)
    changes = [{}, {"d_ff": 48}, {"vocab_size": 60}, {"n_decoder_layers": 2}, {"tie_embeddings": False},
               {"max_len": 40, "positional": "learned"}, {"n_encoder_layers": 2}, {"d_model": 24}, {"tgt_vocab_size": 70},
               {"architecture": "decoder_only", "n_encoder_layers": 0}, {}]
    assert len(changes) > ck._meta_model.cache_info().maxsize + 1
    for change in changes:
        cfg = ModelConfig(**{**base, **change})
        real = {k: v.shape for k, v in Transformer(cfg).state_dict().items()}
        assert {k: v.shape for k, v in ck.meta_reference(cfg).state_dict().items()} == real, change
        assert ck.meta_reference(cfg) is ck.meta_reference(ModelConfig(**{**base, **change}))
    assert ck._meta_model.cache_info().currsize <= ck._meta_model.cache_info().maxsize


def test_loading_draws_no_random_numbers(tmp_path, tiny_translator):
    """Every weight comes from the file, so the load skips random initialisation (two thirds of a 7.6M-parameter
    translator's load time): the global RNG is where it was, and the logits are the saved model's."""
    tok = tiny_translator.tokenizer
    model = build(tok, "encoder_decoder")
    folder = save_checkpoint(tmp_path / "ck", model, tok, META, fp16=False)
    torch.manual_seed(11)
    before = torch.get_rng_state()
    hm = load_checkpoint(folder)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(logits(hm.model), logits(model))


def test_learned_positions_start_as_randn_times_0_02():
    from viz_transformer.core.positional import PositionalEncoding
    torch.manual_seed(3)
    expected = torch.randn(32, 16) * 0.02                         # the formula, drawn from the same seed
    torch.manual_seed(3)
    assert torch.equal(PositionalEncoding("learned", 32, 16).weight.detach(), expected)


@pytest.mark.slow          # a fresh python process
def test_listing_checkpoints_does_not_import_torch_dynamo(ckpt_root):
    """On the meta device normal_/arange/mul run Python references that import torch._dynamo (seconds of
    the app's cold start); listing and loading checkpoints must not reach them."""
    import subprocess
    import sys
    code = ("import sys; from viz_transformer import list_checkpoints, load_checkpoint; "
            f"infos = list_checkpoints({str(ckpt_root)!r}); [load_checkpoint(i.path) for i in infos if not i.error]; "
            "print(len(infos), 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout.split()
    assert int(out[0]) >= 2 and out[1] == "False"


def test_the_light_config_reader_is_the_checkpoints(ckpt_root):
    from viz_transformer.core import checkpoint, checkpoint_files
    folder = ckpt_root / "tiny-lm"
    assert checkpoint_files.read_config_json(folder) == checkpoint.read_config(folder)
    assert checkpoint.CheckpointError is checkpoint_files.CheckpointError
