"""A random NLLB-600M-sized folder for the page benchmark (benchmarks/bench_pages_hf --model nllb): an m2m_100
model with nllb-200-distilled-600M's configuration (12 + 12 layers, 16 heads, d_model 1024, FFN 4096, ReLU,
scaled embeddings, vocabulary 256,206: 615M parameters), saved by transformers with an NllbTokenizer whose BPE is
learned on the project's Chinese and English sentences, padded with unreachable pieces to 256,206.

    python -m benchmarks.bench_pages_hf --model nllb --pages attention     # builds it once under --work
"""
from __future__ import annotations

from pathlib import Path

from benchmarks.texts import sentences

NAME = "nllb-600m-random"
VOCAB = 256206
CODES = ["eng_Latn", "zho_Hans", "fra_Latn", "deu_Latn"]


def nllb_root(work: Path) -> Path:
    """The checkpoint root holding the NLLB-600M-sized folder (built once, about 2.5 GB)."""
    root = work / "nllb-root"
    folder = root / NAME
    if (folder / "model.safetensors").is_file():
        return root
    import json

    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.train_from_iterator(sentences("en")[:10000] + sentences("zh")[:10000], trainers.BpeTrainer(
        vocab_size=8000, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], show_progress=False))
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["model"]["merges"]]
    for code in CODES + ["<mask>"]:
        vocab[code] = len(vocab)
    for i in range(len(vocab), VOCAB):
        vocab[f"[unused{i}]"] = i                 # never produced by the tokenizer: the model's vocabulary size
    nllb = NllbTokenizer(vocab=vocab, merges=merges, extra_special_tokens=CODES, src_lang="zho_Hans",
                         tgt_lang="eng_Latn")
    folder.mkdir(parents=True, exist_ok=True)
    nllb.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = M2M100Config(vocab_size=VOCAB, d_model=1024, encoder_layers=12, decoder_layers=12,
                       encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                       decoder_ffn_dim=4096, activation_function="relu", scale_embedding=True,
                       max_position_embeddings=1024, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                       decoder_start_token_id=2, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    M2M100ForConditionalGeneration(cfg).eval().save_pretrained(folder, safe_serialization=True)
    return root
