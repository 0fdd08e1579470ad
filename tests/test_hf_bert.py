"""Parity with transformers for the BERT family: `load_checkpoint` opens bert, roberta, distilbert
and xlm-roberta folders as transformers saves them (with and without the masked-LM head; tokenizer.json, or
vocab.txt alone; a sentence-transformers layout) as our encoder-only model, and what it builds computes what
transformers computes, on a sentence pair:
  - ids and segment ids equal the family's own tokenizer's ([CLS]/[SEP], <s>/</s></s>), for `pair=` and for
    "A [SEP] B" typed as one text;
  - every attention pattern within 1e-5, every hidden state within 1e-4, the masked-LM logits within 1e-4;
  - removing one family feature (segments, RoBERTa's position offset, the embedding norm, the head's
    transform, attention both ways) breaks that agreement, so the comparison can fail;
  - pickles, remote code and unsupported variants are refused in one line naming the reason.
"""
from __future__ import annotations

import json
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

import hf_bert_util as B
from viz_transformer import CheckpointError, load_checkpoint
from viz_transformer.core.tokenizer import group_words, word_labels

PATTERN_TOL, HIDDEN_TOL, LOGITS_TOL, BROKEN = 1e-5, 1e-4, 1e-4, 1e-3
pytestmark = pytest.mark.slow


@dataclass
class Built:
    shape: B.BertShape
    folder: Path
    tok: object              # AutoTokenizer.from_pretrained(folder)
    ids: list                # the pair as the tokenizer encodes it
    types: list              # its segment ids (all 0 where the tokenizer gives none)
    logits: object           # [T, vocab] from transformers, or None without a head
    hidden: list             # [T, d] per layer, the embeddings' first
    patterns: list           # [heads, T, T] per layer


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert")
    memo = {}

    def get(shape_id: str) -> Built:
        if shape_id not in memo:
            shape = B.SHAPE_BY_ID[shape_id]
            folder = B.build(shape, root / shape.id)
            tok = AutoTokenizer.from_pretrained(folder)
            enc = tok(*B.PAIR)
            types = enc.get("token_type_ids") or [0] * len(enc.input_ids)
            logits, hidden, patterns = B.hf_run(B.load_hf(folder, shape.mlm), enc.input_ids, types)
            memo[shape_id] = Built(shape, folder, tok, enc.input_ids, types, logits, hidden, patterns)
        return memo[shape_id]
    return get


def diff(a, b) -> float:
    assert a.shape == b.shape, f"shape {tuple(a.shape)} vs transformers' {tuple(b.shape)}"
    return float((a.float() - b.float()).abs().max())


def compare(run, b: Built) -> dict:
    """The largest difference of each kind between our run and transformers'."""
    n = len(b.patterns)
    out = {"pattern": max(diff(run.cache[f"encoder.{i}.self_attn.hook_pattern"][0], b.patterns[i]) for i in range(n)),
           "hidden": max([diff(run.cache["encoder.0.hook_resid_pre"][0], b.hidden[0])]
                         + [diff(run.cache[f"encoder.{i}.hook_resid_post"][0], b.hidden[i + 1]) for i in range(n)])}
    if b.logits is not None:
        out["logits"] = diff(run.logits, b.logits)
    return out


SHAPE_IDS = [s.id for s in B.SHAPES]


@pytest.mark.parametrize("shape_id", SHAPE_IDS)
def test_reference_is_random_and_peaked(built, shape_id):
    """HF's zero biases and unit norms, or near-uniform attention, would let a missing feature go unnoticed."""
    b = built(shape_id)
    model = B.load_hf(b.folder, b.shape.mlm)
    for name, p in model.named_parameters():
        assert p.std() > 0.05, f"{name} is (nearly) constant"
    peak = min(float(p.max(-1).values.mean()) for p in b.patterns)     # uniform over 14-21 keys: 0.05-0.07
    assert peak > 0.2, "attention too uniform to catch a bug"
    assert 1 in b.types or b.shape.family != "bert", "a BERT pair has a second segment"


@pytest.mark.parametrize("shape_id", SHAPE_IDS)
def test_pair_matches_transformers(built, shape_id):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    assert hm.cfg.architecture == "encoder_only" and hm.cfg.head == ("mlm" if b.shape.mlm else "none")
    run = hm.run(B.PAIR[0], pair=B.PAIR[1])
    assert run.src_ids == b.ids and run.segments == b.types
    got = compare(run, b)
    assert got["pattern"] < PATTERN_TOL and got["hidden"] < HIDDEN_TOL, got
    assert got.get("logits", 0.0) < LOGITS_TOL, got
    typed = hm.run(f"{B.PAIR[0]} {b.tok.sep_token} {B.PAIR[1]}")       # "A [SEP] B" in one text box
    assert typed.src_ids == b.ids and typed.segments == b.types


@pytest.mark.parametrize("shape_id", ["bert-mlm", "roberta-mlm", "distilbert-mlm", "xlm-roberta-mlm"])
def test_single_texts_tokenize_as_transformers(built, shape_id):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    for text in B.TEXTS + ["İstanbul ÀÉÎ café", "emoji 🙂 ok", "  two  spaces "]:
        assert hm.run(text).src_ids == b.tok(text).input_ids, text


# -- the comparison can fail: each family feature, removed, breaks it --------------------------------------
def _no_type(hm):
    del hm.model.embed.W_type


def _no_offset(hm):
    hm.model.embed.pos_offset = 0


def _no_embed_norm(hm):
    del hm.model.embed.norm


def _no_transform(hm):
    hm.model.head_transform = torch.nn.Identity()


FEATURES = {"bert-mlm": [_no_type, _no_embed_norm, _no_transform], "roberta-mlm": [_no_offset],
            "distilbert-mlm": [_no_embed_norm, _no_transform], "xlm-roberta-bare": [_no_offset, _no_embed_norm]}


@pytest.mark.parametrize("shape_id,feature", [(s, f) for s, fs in FEATURES.items() for f in fs],
                         ids=lambda x: getattr(x, "__name__", x))
def test_removing_a_feature_breaks_agreement(built, shape_id, feature):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    feature(hm)
    got = compare(hm.run(B.PAIR[0], pair=B.PAIR[1]), b)
    assert max(got.values()) > BROKEN, f"{feature.__name__} changed nothing: {got}"


def test_attention_runs_both_ways(built):
    """A causal mask (a decoder's) breaks the agreement: every query sees the keys after it."""
    b = built("bert-mlm")
    hm = load_checkpoint(b.folder)
    causal = lambda m, hook: m & torch.ones(m.shape[-2:], dtype=torch.bool).tril()   # noqa: E731
    run = hm.run(B.PAIR[0], pair=B.PAIR[1], fwd_hooks=[(lambda n: n.endswith("self_attn.hook_mask"), causal)])
    assert compare(run, b)["pattern"] > BROKEN
    upper = run.cache["encoder.0.self_attn.hook_pattern"][0].triu(1)
    assert float(hm.run(B.PAIR[0], pair=B.PAIR[1]).cache["encoder.0.self_attn.hook_pattern"][0].triu(1).sum()) > 1
    assert float(upper.sum()) == 0.0


def test_padding_is_the_only_mask(built):
    """Two texts of different lengths in one batch: the shorter row's real positions compute what they compute
    alone (padding keys masked), as transformers' attention_mask does."""
    from viz_transformer.run.capture import run_padded
    b = built("roberta-mlm")
    hm = load_checkpoint(b.folder)
    texts = ["I love you.", "The cat sat on the mat and looked at the bird."]
    batch, cache = run_padded(hm, texts)
    alone = hm.run(texts[0])
    n = len(alone.src_ids)
    assert batch.src.shape[1] > n
    assert diff(cache["encoder.1.hook_resid_post"][0, :n], alone.cache["encoder.1.hook_resid_post"][0]) < HIDDEN_TOL


# -- tokenizers ------------------------------------------------------------------------------------------
def test_wordpiece_from_vocab_txt_alone(built, tmp_path):
    """A BERT folder with vocab.txt and no tokenizer.json: ids as transformers gives for that folder."""
    b = built("bert-mlm")
    folder = tmp_path / "bert-vocab"
    shutil.copytree(b.folder, folder)
    (folder / "tokenizer.json").unlink()
    vocab = sorted(b.tok.get_vocab().items(), key=lambda kv: kv[1])
    (folder / "vocab.txt").write_text("".join(t + "\n" for t, _ in vocab), encoding="utf-8")
    ref = AutoTokenizer.from_pretrained(folder)
    assert not ref.backend_tokenizer.get_vocab_size() < len(vocab)
    hm = load_checkpoint(folder)
    for text in B.TEXTS[:6] + ["Unaffable ÀÉÎ 我爱你"]:
        assert hm.run(text).src_ids == ref(text).input_ids, text
    run = hm.run(B.PAIR[0], pair=B.PAIR[1])
    assert run.src_ids == b.ids and run.segments == b.types


def test_wordpiece_continuations_group_into_words(built):
    b = built("bert-mlm")
    hm = load_checkpoint(b.folder)
    run = hm.run("Unaffable people sat on the mats.")
    raw = b.tok.convert_ids_to_tokens(run.src_ids)
    assert any(t.startswith("##") for t in raw), raw                  # the text is cut inside a word
    words = word_labels(run.src_pieces, group_words(run.src_pieces))
    assert words == ["[CLS]", "unaffable", "people", "sat", "on", "the", "mats", ".", "[SEP]"], (raw, words)


# -- sentence-transformers ----------------------------------------------------------------------------------
def _sentence_transformers(src: Path, folder: Path, sub: str = "") -> Path:
    """A sentence-transformers layout around a saved BertModel: modules.json, 1_Pooling/, the model at the top
    (sub "") or in a subfolder (0_Transformer, as older versions saved it)."""
    shutil.copytree(src, folder / sub if sub else folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": sub, "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                                  "pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
    return folder


@pytest.mark.parametrize("sub", ["", "0_Transformer"])
def test_sentence_transformers_folder_opens(built, tmp_path, sub):
    b = built("bert-bare-4heads")
    folder = _sentence_transformers(b.folder, tmp_path / "st", sub)
    run = load_checkpoint(folder).run(B.PAIR[0], pair=B.PAIR[1])
    assert run.src_ids == b.ids and compare(run, b)["pattern"] < PATTERN_TOL
    with pytest.raises(CheckpointError, match=r"1_Pooling is a module of the sentence-transformers model .*open .*st"):
        load_checkpoint(folder / "1_Pooling")
    from viz_transformer.core.catalog import list_checkpoints
    root = tmp_path / "root"
    root.mkdir()
    shutil.copytree(folder, root / "minilm")
    info = {i.name: i for i in list_checkpoints(root)}["minilm"]
    assert info.error is None and info.config.architecture == "encoder_only"


# -- refusals -------------------------------------------------------------------------------------------------
def _edit(folder: Path, **changes) -> None:
    path = folder / "config.json"
    raw = json.loads(path.read_text())
    raw.update(changes)
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize("change,message", [
    (dict(auto_map={"AutoModel": "x.Y"}), "remote code"),
    (dict(position_embedding_type="relative_key"), "position_embedding_type 'relative_key' is not supported"),
    (dict(is_decoder=True), "as a decoder"),
    (dict(hidden_act="mish"), "activation 'mish' is not supported"),
    (dict(hidden_size=8192, num_attention_heads=64, intermediate_size=65536, num_hidden_layers=64), "the limit is 8 GiB"),
])
def test_refusals_name_the_reason(built, tmp_path, change, message):
    b = built("bert-mlm")
    folder = tmp_path / "bad"
    shutil.copytree(b.folder, folder)
    _edit(folder, **change)
    with pytest.raises(CheckpointError, match=message) as e:
        load_checkpoint(folder)
    assert "\n" not in str(e.value)


def test_pickled_weights_are_never_unpickled(built, tmp_path):
    b = built("roberta-mlm")
    folder = tmp_path / "pickled"
    shutil.copytree(b.folder, folder)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(CheckpointError, match="pytorch_model.bin is a pickle"):
        load_checkpoint(folder)


# -- fill in the blank ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape_id", ["bert-mlm", "roberta-mlm", "distilbert-mlm"])
def test_fill_in_the_blank_matches_transformers_layer_by_layer(built, shape_id):
    """The top pieces at [MASK] as transformers' own MLM logits rank them, and every layer's reading through
    the head equals transformers' head applied to that layer's hidden state."""
    from viz_transformer.run.fill_mask import fill_blanks
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    text = f"The cat sat on the {b.tok.mask_token}."
    run = hm.run(text)
    hf = B.load_hf(b.folder, True)
    enc = b.tok(text)
    pos = enc.input_ids.index(b.tok.mask_token_id)
    with torch.no_grad():
        out = hf(torch.tensor([enc.input_ids]), output_hidden_states=True)
        layers = [torch.softmax(_hf_head(hf, h[0, pos]), -1) for h in out.hidden_states]
    (blank,) = fill_blanks(hm, run, k=5)
    ref = torch.softmax(out.logits[0, pos], -1).topk(5)
    assert blank.position == pos and blank.top_ids == ref.indices.tolist()
    assert max(abs(p - q) for (_, p), q in zip(blank.top, ref.values.tolist())) < 1e-5
    for got, want in zip(blank.layers, layers):
        top = want.topk(5)
        assert [p for p, _ in got] == hm.tokenizer.pieces(top.indices.tolist())
        assert max(abs(p - q) for (_, p), q in zip(got, top.values.tolist())) < 1e-5
    assert [p for p, _ in blank.layers[-1]] == [p for p, _ in blank.top]      # the last row is the output


def _hf_head(hf, h):
    """transformers' masked-LM head of each family on one hidden state."""
    if hasattr(hf, "cls"):
        return hf.cls(h)
    if hasattr(hf, "lm_head"):
        return hf.lm_head(h)
    return hf.vocab_projector(hf.vocab_layer_norm(hf.activation(hf.vocab_transform(h))))


def test_fill_in_the_blank_needs_a_head(built):
    from viz_transformer.run.fill_mask import fill_blanks
    hm = load_checkpoint(built("bert-bare-4heads").folder)
    with pytest.raises(ValueError, match="needs a masked-LM head"):
        fill_blanks(hm, hm.run("The [MASK] sat."))


def test_the_learned_table_starts_at_roberta_s_first_position(built):
    """The positional page's table: row i is the row position i adds (transformers' position_embeddings row
    pad_token_id + 1 + i for RoBERTa), read from the folder itself."""
    from safetensors import safe_open
    from viz_transformer.run.capture import positional_tables
    b = built("roberta-mlm")
    hm = load_checkpoint(b.folder)
    with safe_open(str(b.folder / "model.safetensors"), "pt") as f:
        table = f.get_tensor("roberta.embeddings.position_embeddings.weight")
    off = hm.cfg.pad_id + 1
    assert off == 2 and torch.equal(positional_tables(hm, 5)["learned"], table[off:off + 5].float())


def test_a_long_text_keeps_its_first_pieces_and_its_closing_sep(built):
    b = built("bert-mlm")
    hm = load_checkpoint(b.folder)
    text = " ".join(B.TEXTS)
    ref = b.tok(text, truncation=True, max_length=hm.cfg.max_len).input_ids      # transformers' own truncation
    run = hm.run(text)
    assert run.src_ids == ref and run.n_cut == len(b.tok(text).input_ids) - hm.cfg.max_len > 0


def test_a_module_path_outside_the_folder_is_refused(built, tmp_path):
    b = built("bert-bare-4heads")
    folder = _sentence_transformers(b.folder, tmp_path / "st")
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "../elsewhere",
                                                      "type": "sentence_transformers.models.Transformer"}]))
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(CheckpointError, match=r"names the module folder '\.\./elsewhere', which is not a folder "
                                              r"inside") as e:
        load_checkpoint(folder)
    assert "\n" not in str(e.value)
