"""Sentence-transformers folders as that library saves them, against the library itself.

Tiny random BERT-family models (tests/hf_bert_util.py) are wrapped in a SentenceTransformer (Transformer,
Pooling, optional Dense and Normalize modules) and saved with its own `save`: version 6's module names and
pooling config. A second layout is the one older versions wrote and real folders such as all-MiniLM-L6-v2 carry:
legacy module names and pooling flags, and a tokenizer.json that stores a fixed padding to 128 and a
truncation at 128. Against transformers' AutoTokenizer and sentence-transformers' encode:
  - ids equal AutoTokenizer's on 20 texts in English, Chinese and both, whatever padding the file stores;
  - the sentence embedding equals `encode` within 1e-5 for every pooling mode, with Dense and Normalize;
  - a text past the model's limit is cut (run.n_cut says so), never padded;
  - a pooling mode or module this project cannot apply is refused in one line.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")             # a local folder: nothing is looked up online
from sentence_transformers import SentenceTransformer  # noqa: E402  (requirements-dev)
from sentence_transformers.sentence_transformer import modules as models  # noqa: E402

import hf_bert_util as B  # noqa: E402
from viz_transformer import CheckpointError, load_checkpoint  # noqa: E402
from viz_transformer.core.st_folder import MODES, sentence_pipeline  # noqa: E402
from viz_transformer.run.pooling import embedding, similarity  # noqa: E402

pytestmark = pytest.mark.slow
TOL = 1e-5
TEXTS = ["I am an engineer.", "The doctor told me to rest at home.", "What is your name?", "I like to drink tea.",
         "Once upon a time there was a little dog.", "The cat sat on the mat and looked at the bird.",
         "We are going to Beijing tomorrow.",
         "我是一名工程师。", "医生让我在家休息。", "你叫什么名字？", "我喜欢喝茶。", "他是我的朋友。", "今天天气很好。",
         "我们明天去北京。",
         "I love you. 我爱你。", "我是一名工程师 (engineer)。", "Beijing 北京 is big.", "她在 school 工作。",
         "The cat 猫 sat.", "emoji 🙂 和 <b>markup</b>"]
SHAPES = ["bert-bare-4heads", "roberta-mlm", "xlm-roberta-bare"]       # WordPiece, byte-level BPE, Unigram


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """shape id -> a save_pretrained folder of that tiny random model."""
    root, memo = tmp_path_factory.mktemp("st"), {}

    def get(shape_id: str) -> Path:
        if shape_id not in memo:
            memo[shape_id] = B.build(B.SHAPE_BY_ID[shape_id], root / shape_id)
        return memo[shape_id]
    return get


def st_save(src: Path, folder: Path, modes=("mean",), dense: bool = False, normalize: bool = False) -> Path:
    """The model wrapped and saved by sentence-transformers itself."""
    tr = models.Transformer(str(src), max_seq_length=32)
    mods = [tr, models.Pooling(tr.get_embedding_dimension(), pooling_mode=list(modes))]
    if dense:
        torch.manual_seed(7)
        d = mods[-1].get_embedding_dimension()
        layer = models.Dense(d, 24, activation_function=torch.nn.Tanh())
        torch.nn.init.normal_(layer.linear.weight, std=0.3)
        torch.nn.init.normal_(layer.linear.bias, std=0.3)
        mods.append(layer)
    if normalize:
        mods.append(models.Normalize())
    SentenceTransformer(modules=mods, device="cpu").save(str(folder))
    return folder


def legacy_layout(src: Path, folder: Path, mode: str = "mean") -> Path:
    """The layout older sentence-transformers wrote (all-MiniLM-L6-v2's): legacy module names and pooling
    flags, and a tokenizer.json storing a fixed padding and a truncation at 128."""
    shutil.copytree(src, folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (folder / "1_Pooling").mkdir()                       # no 2_Normalize folder: all-MiniLM-L6-v2 has none
    flags = {key: key.endswith({"mean": "mean_tokens", "cls": "cls_token"}[mode]) for key in
             ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
              "pooling_mode_mean_sqrt_len_tokens")}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **flags}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": False}))
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    pad = tok.token_to_id("[PAD]") if tok.token_to_id("[PAD]") is not None else tok.token_to_id("<pad>")
    tok.enable_padding(pad_id=pad, pad_token=tok.id_to_token(pad), length=128)
    tok.enable_truncation(max_length=128)
    tok.save(str(folder / "tokenizer.json"))
    spec = json.loads((folder / "tokenizer.json").read_text())
    assert spec["padding"]["strategy"] == {"Fixed": 128} and spec["truncation"]["max_length"] == 128
    return folder


# -- ids -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape_id", SHAPES)
@pytest.mark.parametrize("layout", ["save_pretrained", "sentence-transformers", "legacy"])
def test_ids_equal_autotokenizer_whatever_padding_the_file_stores(base, tmp_path, shape_id, layout):
    src = base(shape_id)
    folder = {"save_pretrained": lambda: src, "sentence-transformers": lambda: st_save(src, tmp_path / "st"),
              "legacy": lambda: legacy_layout(src, tmp_path / "legacy")}[layout]()
    ref, hm = AutoTokenizer.from_pretrained(str(folder)), load_checkpoint(folder)
    for text in TEXTS:
        want = ref(text).input_ids
        assert hm.tokenizer.encode(text) == want, text
        if len(want) <= hm.cfg.max_len:
            assert hm.run(text).src_ids == want, text


def test_a_long_text_is_cut_with_a_count_never_padded(base, tmp_path):
    hm = load_checkpoint(legacy_layout(base("bert-bare-4heads"), tmp_path / "legacy"))
    short = hm.run("I am an engineer.")
    assert hm.tokenizer.pad_id not in short.src_ids
    run = hm.run("我是一名工程师。" * 2500)                           # 20,000 characters
    assert len(run.src_ids) == hm.cfg.max_len and run.n_cut > 0
    assert run.src_ids[-1] == AutoTokenizer.from_pretrained(str(base("bert-bare-4heads"))).sep_token_id


# -- the sentence embedding ------------------------------------------------------------------------------------
CASES = [(dict(modes=(m,)), "bert-bare-4heads") for m in MODES] + [
    (dict(modes=("cls", "mean")), "bert-bare-4heads"),
    (dict(modes=("mean",), dense=True, normalize=True), "bert-bare-4heads"),
    (dict(modes=("max",), normalize=True), "xlm-roberta-bare"),
    (dict(modes=("mean",)), "roberta-mlm")]


@pytest.mark.parametrize("kw,shape_id", CASES, ids=[f"{'+'.join(k['modes'])}{'-dense' * k.get('dense', False)}"
                                                    f"{'-norm' * k.get('normalize', False)}-{s}" for k, s in CASES])
def test_embedding_equals_sentence_transformers_encode(base, tmp_path, kw, shape_id):
    folder = st_save(base(shape_id), tmp_path / "st", **kw)
    ref = SentenceTransformer(str(folder), device="cpu")
    want = ref.encode(TEXTS[:8] + TEXTS[14:18], convert_to_tensor=True).double()
    hm, pipe = load_checkpoint(folder), sentence_pipeline(folder)
    assert pipe.modes == tuple(kw["modes"]) and len(pipe.dense) == kw.get("dense", False)
    compared = 0
    for text, w in zip(TEXTS[:8] + TEXTS[14:18], want):
        run = hm.run(text)
        got = embedding(run, pipe)
        if pipe.beyond(len(run.src_ids)):               # encode read only its first 32 pieces: it must differ
            assert float((got - w).abs().max()) > 1e-3, text
            continue
        assert got.shape == w.shape and float((got - w).abs().max()) < TOL, text
        compared += 1
    assert compared >= 8
    cos = float(torch.nn.functional.cosine_similarity(want[0], want[8], dim=0))
    assert abs(similarity(hm.run(TEXTS[0]), hm.run(TEXTS[14]), pipe) - cos) < TOL


@pytest.mark.parametrize("mode", ["mean", "cls"])
def test_legacy_layout_embeds_as_sentence_transformers(base, tmp_path, mode):
    folder = legacy_layout(base("bert-bare-4heads"), tmp_path / "legacy", mode)
    ref = SentenceTransformer(str(folder), device="cpu")
    pipe = sentence_pipeline(folder)
    assert pipe.modes == (mode,) and pipe.normalize and pipe.max_seq_length == 128
    hm = load_checkpoint(folder)
    want = ref.encode(TEXTS[:4], convert_to_tensor=True).double()
    for text, w in zip(TEXTS[:4], want):
        assert float((embedding(hm.run(text), pipe) - w).abs().max()) < TOL


def test_removing_the_normalize_step_breaks_agreement(base, tmp_path):
    """The comparison can fail: the pipeline without its Normalize module gives another vector."""
    from dataclasses import replace
    folder = st_save(base("bert-bare-4heads"), tmp_path / "st", normalize=True)
    want = SentenceTransformer(str(folder), device="cpu").encode([TEXTS[0]], convert_to_tensor=True)[0].double()
    got = embedding(load_checkpoint(folder).run(TEXTS[0]), replace(sentence_pipeline(folder), normalize=False))
    assert float((got - want).abs().max()) > 1e-3


# -- refusals --------------------------------------------------------------------------------------------------
def test_an_unknown_pooling_mode_is_refused_in_one_line(base, tmp_path):
    folder = st_save(base("bert-bare-4heads"), tmp_path / "st")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "median"}))
    load_checkpoint(folder)                                      # the model itself still opens
    with pytest.raises(CheckpointError, match=r"pooling mode 'median'; known: cls, max, mean") as e:
        sentence_pipeline(folder)
    assert "\n" not in str(e.value)


def test_an_unknown_module_and_a_pickled_dense_are_refused(base, tmp_path):
    folder = st_save(base("bert-bare-4heads"), tmp_path / "st", dense=True)
    dense = next(p for p in folder.iterdir() if p.name.endswith("_Dense"))
    (dense / "model.safetensors").rename(dense / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="safetensors only, never unpickled"):
        sentence_pipeline(folder)
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["type"] = "sentence_transformers.models.LSTM"
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(CheckpointError, match="'sentence_transformers.models.LSTM', which this project does not apply"):
        sentence_pipeline(folder)


def test_a_folder_without_modules_pools_by_the_mean(base):
    pipe = sentence_pipeline(base("bert-bare-4heads"))
    assert pipe.modes == ("mean",) and not pipe.declared and not pipe.normalize


def test_a_stored_padding_without_a_pad_token_changes_nothing(base, tmp_path):
    """Padding settings name a pad token the vocabulary lacks: ignored as transformers ignores them."""
    folder = tmp_path / "nopad"
    shutil.copytree(base("bert-bare-4heads"), folder)
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["padding"] = {"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 9999,
                       "pad_type_id": 0, "pad_token": "<nothing>"}
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    ref, hm = AutoTokenizer.from_pretrained(str(base("bert-bare-4heads"))), load_checkpoint(folder)
    assert all(hm.run(x).src_ids == ref(x).input_ids for x in TEXTS[:3])


@pytest.mark.parametrize("case,message", [
    ("bin-only", r"pytorch_model\.bin is a pickle .* never unpickled here: save the model with safetensors"),
    ("no-vocab", r"is missing vocab\.txt|has no tokenizer\.json"),
])
def test_broken_folders_are_refused_in_one_line(base, tmp_path, case, message):
    folder = st_save(base("bert-bare-4heads"), tmp_path / "st")
    if case == "bin-only":
        (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    else:
        (folder / "tokenizer.json").unlink()
        (folder / "vocab.txt").unlink(missing_ok=True)
    with pytest.raises(CheckpointError, match=message) as e:
        load_checkpoint(folder)
    assert "\n" not in str(e.value)
