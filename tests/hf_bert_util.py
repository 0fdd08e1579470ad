"""Tiny random BERT-family models saved as local folders, for tests/test_hf_bert.py.

Each BertShape builds one `transformers` model (bert, roberta, distilbert, xlm-roberta; with or without the
masked-LM head) with every weight random (HF's init sets biases to 0 and norms to 1, and would hide a missing
bias or norm; learned position and segment tables random too), and the family's own tokenizer class made
from a vocabulary trained here with `tokenizers` (WordPiece for BERT and DistilBERT, byte-level BPE for
RoBERTa, Unigram for XLM-R), saved with save_pretrained. `hf_run` runs a folder through transformers itself
(eager attention, float32): the reference our loader is compared against.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import hf_util as H

transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()

TEXTS = H.EN + H.ZH + ["Unaffable people sat on the mats.", "The [MASK] sat on the mat."]
PAIR = ("The cat sat on the mat.", "我爱你。")


def _wordpiece_vocab() -> dict:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    from tokenizers import normalizers
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    trainer = trainers.WordPieceTrainer(vocab_size=160, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train_from_iterator(TEXTS * 3, trainer)
    return tok.get_vocab()


def _bpe_vocab() -> tuple[dict, list]:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS * 3, trainer)
    spec = json.loads(tok.to_str())
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["model"]["merges"]]
    return spec["model"]["vocab"], merges


def _unigram_vocab() -> list:
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=120, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                      unk_token="<unk>", show_progress=False)
    tok.train_from_iterator(TEXTS * 3, trainer)
    return H.unigram_pieces(tok, 4) + [("<mask>", 0.0)]


def make_tokenizer(kind: str):
    """The family's own transformers tokenizer class over a vocabulary trained here."""
    if kind == "wordpiece":
        return transformers.BertTokenizer(vocab=_wordpiece_vocab())
    if kind == "bpe":
        vocab, merges = _bpe_vocab()
        return transformers.RobertaTokenizer(vocab=vocab, merges=merges)
    return transformers.XLMRobertaTokenizer(vocab=_unigram_vocab())


@dataclass
class BertShape:
    id: str
    family: str                  # model_type
    tokenizer: str               # wordpiece | bpe | unigram
    config: dict
    mlm: bool = True             # …ForMaskedLM (else the bare model, as a sentence encoder saves it)
    seed: int = 0
    extra: dict = field(default_factory=dict)


BERT = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=80,
            max_position_embeddings=40, type_vocab_size=2, layer_norm_eps=1e-6, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
SHAPES = [
    BertShape("bert-mlm", "bert", "wordpiece", BERT),
    BertShape("bert-bare-4heads", "bert", "wordpiece", dict(BERT, hidden_size=32, num_attention_heads=4,
                                                            hidden_act="gelu_new"), mlm=False, seed=1),
    BertShape("roberta-mlm", "roberta", "bpe", dict(BERT, max_position_embeddings=42, type_vocab_size=1), seed=2),
    BertShape("distilbert-mlm", "distilbert", "wordpiece",
              dict(dim=48, n_layers=2, n_heads=3, hidden_dim=80, max_position_embeddings=40, dropout=0.0,
                   attention_dropout=0.0), seed=3),
    BertShape("xlm-roberta-mlm", "xlm-roberta", "unigram", dict(BERT, max_position_embeddings=42, type_vocab_size=1),
              seed=4),
    BertShape("xlm-roberta-bare", "xlm-roberta", "unigram",
              dict(BERT, max_position_embeddings=42, type_vocab_size=1), mlm=False, seed=5),
    BertShape("bert-mlm-untied-relu", "bert", "wordpiece", dict(BERT, tie_word_embeddings=False, hidden_act="relu"),
              seed=6),
]
SHAPE_BY_ID = {s.id: s for s in SHAPES}


@torch.no_grad()
def randomize(model, seed: int) -> None:
    """Every parameter random: LayerNorm weights around 1 (spread 0.3), biases N(0, 0.3²), matrices and
    embedding tables (positions and segments included) N(0, (2 / √fan_in)²) so attention is peaked."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if p.ndim == 1 and ("LayerNorm" in name or "layer_norm" in name):
            p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
        elif p.ndim == 1:
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
        else:
            p.copy_(torch.randn(p.shape, generator=g) * 2.0 / p.shape[-1] ** 0.5)


def build(shape: BertShape, folder) -> Path:
    """Save shape's tiny random model and its tokenizer in folder (save_pretrained, safetensors)."""
    folder = Path(folder)
    tok = make_tokenizer(shape.tokenizer)
    cls = transformers.AutoConfig.for_model(shape.family).__class__
    cfg = cls(**shape.config, vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    torch.manual_seed(shape.seed)
    auto = transformers.AutoModelForMaskedLM if shape.mlm else transformers.AutoModel
    model = auto.from_config(cfg).eval()
    randomize(model, 100 + shape.seed)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def load_hf(folder, mlm: bool):
    auto = transformers.AutoModelForMaskedLM if mlm else transformers.AutoModel
    return auto.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()


def hf_run(model, ids: list[int], types: list[int]):
    """(logits [T, vocab] or None, hidden states [T, d] per layer incl. the embeddings', patterns
    [heads, T, T] per layer) from transformers."""
    kw = {"token_type_ids": torch.tensor([types])} if "distil" not in type(model).__name__.lower() else {}
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True, **kw)
    logits = out.logits[0] if hasattr(out, "logits") else None
    return logits, [h[0] for h in out.hidden_states], [a[0] for a in out.attentions]
