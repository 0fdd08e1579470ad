"""Tiny random T5 folders saved by transformers, for tests/test_hf_t5.py and the app's walks with a T5 folder.

T5_SHAPES: v1.0 settings (ReLU feed-forward, output tied to the embedding and scaled by d_model^-0.5) and v1.1
settings (gated GELU, no output scaling; mT5's model_type in one), each with a SentencePiece Unigram tokenizer
(T5's layout: <pad> 0, </s> 1, <unk> 2, then sentinels <extra_id_N> at the end) saved as tokenizer.json, or as
spiece.model alone. Every parameter is random (transformers' init sets norms to 1), the position bias large
enough to move the patterns, the weights scaled so attention is peaked.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers

from hf_util import EN, ZH

transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()


@dataclass
class T5Shape:
    id: str
    family: str = "t5"                   # t5 | mt5 (model_type)
    proj: str = "relu"                   # feed_forward_proj: relu (v1.0) | gated-gelu (v1.1, mT5, FLAN-T5)
    tie: bool = True                     # tie_word_embeddings: v1.0 True (decoder output × d_model^-0.5)
    d_model: int = 32
    heads: int = 4
    d_kv: int = 8
    layers: tuple = (2, 3)
    buckets: int = 8
    max_distance: int = 20
    spiece_only: bool = False            # the folder keeps spiece.model and no tokenizer.json
    seed: int = 0
    generation: dict = field(default_factory=dict)


T5_SHAPES = [
    T5Shape("t5-v1.0-relu-tied", layers=(3, 2), generation=dict(num_beams=3, max_length=16), seed=1),
    T5Shape("t5-v1.1-gated-gelu", proj="gated-gelu", tie=False, d_model=40, heads=5, d_kv=6, layers=(3, 2),
            buckets=16, max_distance=12, seed=2, generation=dict(num_beams=4, length_penalty=0.6, max_new_tokens=12)),
    T5Shape("mt5-gated-gelu-spiece", family="mt5", proj="gated-gelu", tie=False, layers=(2, 2), buckets=6,
            max_distance=9, spiece_only=True, seed=3, generation=dict(num_beams=2, early_stopping=True, max_new_tokens=9)),
]
T5_BY_ID = {s.id: s for s in T5_SHAPES}
TEXTS = ["I am an engineer.", "The weather is nice today.", "I love you. 我爱你。",
         "Once upon a time there was a little dog.", "translate English to German: The cat sat on the mat."]


def spiece(folder: Path, size: int = 120) -> Path:
    """A SentencePiece Unigram model in T5's layout (<pad> 0, </s> 1, <unk> 2) at folder/spiece.model."""
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(sentence_iterator=iter((EN + ZH) * 30), model_prefix=str(folder / "spiece"),
                                   vocab_size=size, hard_vocab_limit=False, model_type="unigram", pad_id=0, eos_id=1,
                                   unk_id=2, bos_id=-1, minloglevel=2)
    (folder / "spiece.vocab").unlink()
    return folder / "spiece.model"


@torch.no_grad()
def randomize_t5(model, g: torch.Generator) -> None:
    """Norm weights in [0.5, 1.5], the position bias N(0, 2²) (it must move the patterns), each matrix
    N(0, (gain / √fan_in)²) (T5 does not divide q·k by √d: its own init folds that in), embeddings N(0, 1)."""
    for name, p in model.named_parameters():
        if "layer_norm" in name:
            p.copy_(0.5 + torch.rand(p.shape, generator=g))
        elif "relative_attention_bias" in name:
            p.copy_(2.0 * torch.randn(p.shape, generator=g))
        elif name in ("shared.weight", "lm_head.weight"):
            p.copy_(torch.randn(p.shape, generator=g))
        else:
            gain = 1.5 if name.endswith((".q.weight", ".k.weight")) else 1.0
            p.copy_(torch.randn(p.shape, generator=g) * gain / p.shape[-1] ** 0.5)


def build_t5(shape: T5Shape, folder) -> Path:
    """Save shape's tiny random T5 (or mT5), its tokenizer and generation_config.json in folder."""
    from transformers import T5Tokenizer
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    spiece(folder)
    tok = T5Tokenizer.from_pretrained(folder, extra_ids=5)
    if not shape.spiece_only:
        tok.save_pretrained(folder)
        os.remove(folder / "spiece.model")
    else:
        (folder / "tokenizer_config.json").write_text('{"extra_ids": 5, "tokenizer_class": "T5Tokenizer"}')
    cls = transformers.MT5Config if shape.family == "mt5" else transformers.T5Config
    enc, dec = shape.layers
    cfg = cls(vocab_size=len(tok), d_model=shape.d_model, d_kv=shape.d_kv, d_ff=2 * shape.d_model, num_layers=enc,
              num_decoder_layers=dec, num_heads=shape.heads, relative_attention_num_buckets=shape.buckets,
              relative_attention_max_distance=shape.max_distance, dropout_rate=0.0, feed_forward_proj=shape.proj,
              tie_word_embeddings=shape.tie, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model_cls = transformers.MT5ForConditionalGeneration if shape.family == "mt5" else transformers.T5ForConditionalGeneration
    torch.manual_seed(shape.seed)
    model = model_cls(cfg).eval()
    randomize_t5(model, torch.Generator().manual_seed(shape.seed))
    model.generation_config.num_beams = 1
    for k, v in shape.generation.items():
        setattr(model.generation_config, k, v)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def load_t5(folder):
    """(T5ForConditionalGeneration / MT5… in float32 with eager attention, its tokenizer) from a saved folder."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(folder)
