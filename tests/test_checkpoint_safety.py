"""Hostile checkpoints: planted pickles never run, corrupt or oversized weights and configs are
refused before anything is allocated, links out of the checkpoints folder are refused, and the
app keeps serving the good checkpoints beside the bad ones."""
from __future__ import annotations

import json
import math
import os
import pickle
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from app_util import by_key, open_app, tables, texts
from viz_transformer import CheckpointError, list_checkpoints, load_checkpoint
from viz_transformer.core.checkpoint import CHECKSUM, read_config
from viz_transformer.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
CORE = ("config.json", "model.safetensors", "tokenizer.model", "meta.json")
EXTRAS = ("pytorch_model.bin", "model.pt", "model.pth", "model.ckpt", "checkpoint.pt", "optimizer.pt",
          "training_args.bin", "state.pkl", "tokenizer.pkl")


class Marker:
    """Unpickling this creates the file `path` (open(path, "w")): the proof that something unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def payloads(marker: Path) -> dict:
    """A raw pickle and a torch.save zip, each of which creates `marker` when loaded."""
    zipped = marker.parent / "payload.zip"
    torch.save({"weights": Marker(marker)}, zipped)
    return {"pickle": pickle.dumps(Marker(marker), protocol=4), "torch.save": zipped.read_bytes()}


@pytest.fixture
def good(tmp_path, ckpt_root):
    return shutil.copytree(ckpt_root / "tiny-zh-en", tmp_path / "root" / "good")


def expect_error(folder, *fragments) -> str:
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(folder)
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))
    return str(info.value)


def test_the_payloads_do_create_the_marker_when_unpickled(tmp_path):
    """The planted files are real attacks: loaded the unsafe way, they create the marker."""
    marker = tmp_path / "pwned"
    p = payloads(marker)
    pickle.loads(p["pickle"])
    assert marker.exists()
    marker.unlink()
    (tmp_path / "m.pt").write_bytes(p["torch.save"])
    torch.load(tmp_path / "m.pt", weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("kind", ["pickle", "torch.save"])
@pytest.mark.parametrize("name", CORE)
def test_a_pickle_in_place_of_a_checkpoint_file_is_refused_and_never_run(good, tmp_path, name, kind):
    marker = tmp_path / "pwned"
    (good / name).write_bytes(payloads(marker)[kind])
    expect_error(good, name, "pickle")
    infos = list_checkpoints(good.parent)
    assert infos[0].error and name in infos[0].error
    assert cli_main(["info", "--checkpoint", str(good)]) == 2
    assert not marker.exists()


def test_pickles_beside_the_files_are_ignored_and_never_run(good, tmp_path):
    marker = tmp_path / "pwned"
    p = payloads(marker)
    for i, name in enumerate(EXTRAS):
        (good / name).write_bytes(p["pickle" if i % 2 else "torch.save"])
    (good.parent / "model.pt").write_bytes(p["pickle"])             # and in the checkpoints folder itself
    (good.parent / "only-pickles").mkdir()
    (good.parent / "only-pickles" / "pytorch_model.bin").write_bytes(p["torch.save"])
    hm = load_checkpoint(good)
    assert hm.run("我是学生。").output is not None
    infos = {i.name: i for i in list_checkpoints(good.parent)}
    assert infos["good"].error is None and "missing" in infos["only-pickles"].error
    assert not marker.exists()


# -- corrupt weights ----------------------------------------------------------------------------------
def tensor_offset(path: Path, name: str) -> int:
    """Absolute file offset of a tensor's first byte, read from the safetensors header by hand."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    return 8 + n + json.loads(data[8: 8 + n])[name]["data_offsets"][0]


def test_a_flipped_bit_in_the_weights_is_caught_by_the_checksum(good):
    w = good / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[tensor_offset(w, "encoder.0.ff.W_in.weight") + 5] ^= 0x01      # a low mantissa bit: finite
    w.write_bytes(bytes(data))
    expect_error(good, "model.safetensors", "sha256", "meta.json")


def test_a_flipped_bit_in_the_header_is_caught(good):
    w = good / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[9] ^= 0x40                                                          # inside the JSON header
    w.write_bytes(bytes(data))
    expect_error(good, "model.safetensors")


@pytest.mark.parametrize("values", [[float("inf")], [float("-inf")], [float("nan")], [3e38, 3e38], [3e38, -3e38]])
def test_without_a_checksum_an_infinite_weight_is_still_refused(good, values):
    """NaN and infinities are refused; values whose sum overflows but which are each finite load, as they are."""
    meta = json.loads((good / "meta.json").read_text())
    meta.pop(CHECKSUM)
    (good / "meta.json").write_text(json.dumps(meta))
    w = good / "model.safetensors"
    data = bytearray(w.read_bytes())
    at = tensor_offset(w, "encoder.0.ff.W_in.weight")
    for i, v in enumerate(values):
        data[at + 4 * i: at + 4 * i + 4] = struct.pack("<f", v)            # the tiny checkpoint is float32
    w.write_bytes(bytes(data))
    if all(math.isfinite(v) for v in values):
        weight = load_checkpoint(good).model.state_dict()["encoder.0.ff.W_in.weight"].flatten()
        assert weight[:len(values)].tolist() == [struct.unpack("<f", struct.pack("<f", v))[0] for v in values]
    else:
        expect_error(good, "model.safetensors", "encoder.0.ff.W_in.weight", "infinite")


@pytest.mark.parametrize("cut", [8, 100, -1])
def test_truncated_weights_at_any_point(good, cut):
    w = good / "model.safetensors"
    w.write_bytes(w.read_bytes()[:cut])
    expect_error(good, "model.safetensors", "truncated or corrupt")


def test_weights_larger_than_the_config_needs_are_refused_before_reading(good):
    w = good / "model.safetensors"
    with open(w, "ab") as f:
        f.truncate(w.stat().st_size + (64 << 20))      # sparse: 64 MiB of nothing after the tensors
    expect_error(good, "model.safetensors", "more than the model")


@pytest.mark.parametrize("change,words", [({"d_ff": 128}, ["ff.W_in", "the config needs (128"]),
                                          ({"tie_embeddings": False}, ["missing tensors"]),
                                          ({"max_len": 32, "positional": "learned"}, ["missing"])])
def test_shapes_disagreeing_with_the_config(good, change, words):
    cfg = json.loads((good / "config.json").read_text())
    cfg.update(change)
    (good / "config.json").write_text(json.dumps(cfg))
    expect_error(good, "model.safetensors", "config.json", *words)


# -- absurd configs: refused before allocating ----------------------------------------------------------
ABSURD = [({"d_model": 2560000, "n_heads": 8}, "d_model 2,560,000 is above the limit"),
          ({"vocab_size": 200000, "d_model": 8192, "n_heads": 8}, "GiB"),       # each size allowed, the total not
          ({"max_len": 10 ** 9}, "max_len"),
          ({"n_decoder_layers": 10 ** 6}, "n_decoder_layers")]


@pytest.mark.slow          # a python process each
@pytest.mark.parametrize("change,words", ABSURD)
def test_absurd_config_is_refused_by_info_under_a_memory_cap(good, change, words):
    cfg = json.loads((good / "config.json").read_text())
    cfg.update(change)
    (good / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="config.json"):
        read_config(good)

    def cap():      # any attempt to allocate the model would die here with a MemoryError traceback
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    r = subprocess.run([sys.executable, "-m", "viz_transformer", "info", "--checkpoint", str(good)], cwd=ROOT,
                       capture_output=True, text=True, preexec_fn=cap, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "config.json" in r.stderr and words in r.stderr, r.stderr


# -- links out of the checkpoints folder ----------------------------------------------------------------
def test_a_folder_linking_outside_the_root_is_refused(good, tmp_path, ckpt_root):
    outside = shutil.copytree(ckpt_root / "tiny-lm", tmp_path / "elsewhere")
    (good.parent / "linked").symlink_to(outside, target_is_directory=True)
    infos = {i.name: i for i in list_checkpoints(good.parent)}
    assert infos["good"].error is None
    assert "outside" in infos["linked"].error and str(outside) in infos["linked"].error


@pytest.mark.parametrize("name", CORE)
def test_a_file_linking_outside_its_folder_is_refused(good, tmp_path, ckpt_root, name):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(good / name, outside / name)              # the very same bytes, only the place differs
    (good / name).unlink()
    (good / name).symlink_to(outside / name)
    expect_error(good, name, "outside")
    assert "outside" in list_checkpoints(good.parent)[0].error


def test_links_to_devices_are_refused(good):
    (good / "model.safetensors").unlink()
    (good / "model.safetensors").symlink_to("/dev/zero")
    expect_error(good, "model.safetensors", "outside")


def test_a_link_inside_the_folder_is_fine(good):
    (good / "weights.bin").write_bytes((good / "model.safetensors").read_bytes())
    (good / "model.safetensors").unlink()
    (good / "model.safetensors").symlink_to("weights.bin")
    assert load_checkpoint(good).run("我是学生。").output is not None


# -- the app keeps serving the good checkpoints ---------------------------------------------------------
def test_the_app_lists_every_bad_checkpoint_and_keeps_serving_the_good_one(good, tmp_path, ckpt_root, monkeypatch):
    root, marker = good.parent, tmp_path / "pwned"
    bad = {}
    for name, change in (("absurd", {"d_model": 2560000}), ("mismatch", {"d_ff": 128})):
        f = shutil.copytree(good, root / name)
        cfg = json.loads((f / "config.json").read_text())
        cfg.update(change)
        (f / "config.json").write_text(json.dumps(cfg))
        bad[name] = "config.json"
    f = shutil.copytree(good, root / "pickled")
    (f / "model.safetensors").write_bytes(payloads(marker)["pickle"])
    bad["pickled"] = "pickle"
    f = shutil.copytree(good, root / "flipped")
    data = bytearray((f / "model.safetensors").read_bytes())
    data[-3] ^= 0x01
    (f / "model.safetensors").write_bytes(bytes(data))
    bad["flipped"] = "sha256"
    (root / "linked").symlink_to(shutil.copytree(ckpt_root / "tiny-lm", tmp_path / "outside"))
    bad["linked"] = "outside"
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(root))

    at = open_app(ckpt="good")
    assert len(tables(at)) == 3                                         # the good one works
    for name, word in bad.items():
        by_key(at.sidebar.selectbox, "ckpt").set_value(name).run(timeout=60)
        assert not at.exception, (name, [e.value for e in at.exception])
        assert "This checkpoint cannot be used" in texts(at) and word in texts(at), (name, texts(at))
        by_key(at.sidebar.selectbox, "ckpt").set_value("good").run(timeout=60)
        assert not at.exception and len(tables(at)) == 3, name
    assert not marker.exists()


def test_listing_is_remembered_until_a_file_changes(good, monkeypatch):
    import viz_transformer.core.checkpoint as C
    calls = []
    real = C.read_config
    monkeypatch.setattr(C, "read_config", lambda f: calls.append(f) or real(f))
    assert list_checkpoints(good.parent)[0].error is None and len(calls) == 1
    assert list_checkpoints(good.parent)[0].error is None and len(calls) == 1     # nothing changed: not re-read
    cfg = json.loads((good / "config.json").read_text())
    (good / "config.json").write_text(json.dumps({**cfg, "d_model": 2560000}))
    assert "d_model" in list_checkpoints(good.parent)[0].error and len(calls) == 2
    (good / "config.json").unlink()
    (good / "config.json").symlink_to("/etc/hostname")
    assert "outside" in list_checkpoints(good.parent)[0].error
