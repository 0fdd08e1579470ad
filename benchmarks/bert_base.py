"""A random BERT-base-sized folder for the page benchmark (benchmarks/bench_pages_hf --model bert): BertForMaskedLM with bert-base-uncased's
configuration (12 layers, 12 heads, d_model 768, FFN 3072, vocabulary 30,522: 110M parameters), saved by
transformers with a WordPiece vocabulary learned on the story corpus and padded with [unusedN] pieces to 30,522.

    python -m benchmarks.bench_pages_hf --model bert --pages attention      # builds it once under --work
"""
from __future__ import annotations

from pathlib import Path

from benchmarks.texts import sentences

NAME = "bert-base-random"
VOCAB = 30522


def bert_root(work: Path) -> Path:
    """The checkpoint root holding the BERT-base-sized folder (built once, about 440 MB)."""
    root = work / "bert-root"
    folder = root / NAME
    if (folder / "model.safetensors").is_file():
        return root
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(sentences("en")[:20000], trainers.WordPieceTrainer(
        vocab_size=VOCAB, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    vocab = tok.get_vocab()
    for i in range(len(vocab), VOCAB):
        vocab[f"[unused{i}]"] = i                     # never produced by the tokenizer, as bert-base's [unusedN]
    folder.mkdir(parents=True, exist_ok=True)
    BertTokenizer(vocab=vocab).save_pretrained(folder)
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=VOCAB))      # bert-base-uncased's shape: the defaults
    model.save_pretrained(folder, safe_serialization=True)
    return root
