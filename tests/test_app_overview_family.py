"""The Overview tells each family as it is: the diagram's embedding block reads the config's
scale_embeddings, the text names the model's own norm and tokenizer (GPT-2: LayerNorm and byte-level BPE, Llama:
RMSNorm), a training curve is drawn from meta.json wherever one is recorded, a one-sequence model's pieces fill
the width; the lesson writer's picker speaks Chinese; the README puts the language switch where the app has it."""
from __future__ import annotations

import dataclasses
import re

import pytest

import hf_util as H
from app_util import ROOT, array, figure, figures, open_app, tables, texts
from conftest import make_tiny_checkpoint
from viz_transformer.core import checkpoint_files
from viz_transformer.core.config import ModelConfig
from viz_transformer.plots import diagram
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH

CURVE = [{"epoch": e, "step": 40 * e, "train_loss": 5.0 / e, "perplexity": 90.0 / e} for e in (1, 2, 3, 4)]


def _embedding_label(cfg: ModelConfig) -> str:
    fig = diagram.architecture_diagram(cfg, src_len=5 if cfg.is_encoder_decoder else None, tgt_len=3)
    return next(a.text for a in fig.layout.annotations if a.name and a.name.endswith(":tok_embed"))


def test_the_diagram_multiplies_by_sqrt_d_model_only_when_the_config_does():
    cfg = ModelConfig(vocab_size=50, d_model=32, n_heads=4, d_ff=64)
    assert cfg.scale_embeddings and "√d_model" in _embedding_label(cfg)
    assert "√d_model" not in _embedding_label(dataclasses.replace(cfg, scale_embeddings=False))
    lm = ModelConfig(vocab_size=50, d_model=32, n_heads=4, d_ff=64, architecture="decoder_only", n_encoder_layers=0,
                     scale_embeddings=False, norm_type="rms")
    assert _embedding_label(lm) == diagram.LABELS["tok_embed.unscaled"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Two imported Hugging Face folders (GPT-2: LayerNorm, byte-level BPE; Llama: RMSNorm), a tiny translator whose
    meta.json records a per-epoch curve and no training snapshots, and a tiny one-sequence translator."""
    root = tmp_path_factory.mktemp("family-checkpoints")
    for name in ("gpt2-3heads-tied", "llama-3heads-tied"):
        H.build(H.SHAPE_BY_ID[name], root / name)
    make_tiny_checkpoint(root / "tiny-curve")
    checkpoint_files.update_meta(root / "tiny-curve", curve=CURVE)
    make_tiny_checkpoint(root / "tiny-zh-en-decoder", "decoder_only", sep=True)
    return root


def _intro(at) -> str:
    return " ".join(c.value for c in at.caption[:2])


@pytest.mark.parametrize("name, tokenizer, norm", [("gpt2-3heads-tied", "byte-level BPE", "LayerNorm"),
                                                   ("llama-3heads-tied", "byte-level BPE", "RMSNorm")])
def test_an_imported_model_is_told_with_its_own_norm_tokenizer_and_embedding(env, name, tokenizer, norm):
    at = open_app(ckpt=name, text="Once upon a time")
    intro = _intro(at)
    assert f"{tokenizer} pieces" in intro and "SentencePiece" not in intro, intro
    assert f"LN = {EN['ov.ln.' + ('rms' if norm == 'RMSNorm' else 'layer')]}" in intro, intro
    assert ("RMS" in intro) == (norm == "RMSNorm")
    labels = [a["text"] for a in figure(at, "d_model")["layout"]["annotations"]]
    assert "Token embedding" in labels and not any("√d_model" in s for s in labels), labels
    settings = tables(at)[0]                      # "Every setting": the norm row names the real norm
    assert any(norm in str(v) for v in settings.iloc[:, 1]), settings
    other = "LayerNorm" if norm == "RMSNorm" else "RMSNorm"
    assert not any(other in str(v) for v in settings.iloc[:, 1])


def test_an_imported_model_in_chinese_names_its_tokenizer(env):
    at = open_app(ckpt="gpt2-3heads-tied", text="Once upon a time", lang="zh")
    assert "SentencePiece" not in _intro(at) and ZH.get("ov.tok.byte_bpe", "?") in _intro(at)


def test_our_translator_still_says_sentencepiece_and_sqrt_d_model(env):
    at = open_app(ckpt="tiny-curve")
    assert "SentencePiece pieces" in _intro(at) and EN["ov.ln.layer"] in _intro(at)
    labels = [a["text"] for a in figure(at, "d_model")["layout"]["annotations"]]
    assert "Token embedding × √d_model" in labels


def test_a_curve_recorded_in_meta_json_is_drawn(env):
    at = open_app(ckpt="tiny-curve")
    fig = figure(at, EN["ov.loss_title"])
    assert list(array(fig["data"][0]["x"])) == [h["step"] for h in CURVE]
    assert list(array(fig["data"][0]["y"])) == pytest.approx([h["train_loss"] for h in CURVE])
    assert EN["ov.no_curve"] not in texts(at) and EN["ov.epoch_curve"] in texts(at)


def test_a_checkpoint_without_a_curve_says_so(ckpt_root, monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ckpt_root))
    at = open_app(ckpt="tiny-zh-en")
    assert EN["ov.no_curve"] in texts(at)
    assert not [f for f in figures(at) if EN["ov.loss_title"] in f["layout"]["title"]["text"]]


def test_a_one_sequence_model_shows_its_pieces_across_the_width(env):
    at = open_app(ckpt="tiny-zh-en-decoder")
    holding = [c for c in at.columns if any(getattr(m, "value", None) == f"**{EN['ov.tgt']}**" for m in c.markdown)]
    assert len(holding) == 1
    parent = next(b for b in _blocks(at.main) if holding[0] in list(b.children.values()))
    siblings = list(parent.children.values())
    assert len(siblings) == 1, f"{len(siblings)} columns for one table"          # no empty half beside it


def _blocks(node):
    for child in getattr(node, "children", {}).values():
        if hasattr(child, "children"):
            yield child
            yield from _blocks(child)


def test_the_lesson_writers_picker_is_in_chinese():
    at = open_app(lang="zh")
    pick = next(s for s in at.sidebar.selectbox if s.key == "ls_q_kind")
    assert pick.proto.placeholder and pick.proto.placeholder == ZH.get("w.choose") != EN.get("w.choose")


def test_the_readme_puts_the_language_switch_where_the_app_has_it():
    app = (ROOT / "app.py").read_text(encoding="utf-8")
    assert app.index("st.navigation(") < app.index("language.switch()")          # the switch after the page list
    en = (ROOT / "README.md").read_text(encoding="utf-8")
    zh = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert "top of the\nsidebar" not in en and "at the top of the sidebar" not in re.sub(r"\s+", " ", en)
    assert "below the page list" in re.sub(r"\s+", " ", en)
    assert "侧边栏顶部的“界面语言”" not in zh and "页面列表下方" in zh
