"""Tiny random translation-family folders (bart, mbart, m2m_100, an NLLB-style m2m_100) saved as transformers
saves them, for tests/test_hf_bart.py.

Each tokenizer is transformers' own class built on a vocabulary trained here (RobertaTokenizer's byte-level BPE
for BART, MBartTokenizer's Unigram, M2M100Tokenizer's SentencePiece + vocab.json, NllbTokenizer's BPE), so the
saved files are what save_pretrained writes; every parameter random and large enough that attention is peaked.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from hf_util import EN, ZH, randomize_marian, unigram_pieces

transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()

TEXTS = ZH + EN + ["I love you. 我爱你。", "今天 the weather 很好。", "我们明天去北京 tomorrow。"]
MBART_CODES = ["en_XX", "zh_CN", "fr_XX"]            # the codes the tiny mBART carries (the real one: 25 or 52)
NLLB_CODES = ["eng_Latn", "zho_Hans", "fra_Latn", "deu_Latn"]


@dataclass
class Shape:
    id: str
    family: str                   # bart | mbart | m2m_100 | nllb (an m2m_100 with an NllbTokenizer)
    d_model: int = 48
    heads: int = 3
    layers: tuple = (2, 2)
    seed: int = 0
    config: dict = field(default_factory=dict)
    generation: dict = field(default_factory=dict)


SHAPES = [
    Shape("bart", "bart", seed=1, config=dict(activation_function="gelu"),
          generation=dict(num_beams=4, max_length=20, forced_bos_token_id=0)),
    Shape("mbart", "mbart", d_model=32, heads=4, layers=(2, 1), seed=2,
          config=dict(activation_function="gelu", scale_embedding=True), generation=dict(num_beams=3, max_length=20)),
    Shape("m2m_100", "m2m_100", seed=3, config=dict(activation_function="relu"),
          generation=dict(num_beams=4, max_length=20)),
    Shape("nllb", "nllb", d_model=40, heads=2, layers=(1, 2), seed=4,
          config=dict(activation_function="relu"), generation=dict(num_beams=3, max_length=20, length_penalty=0.8)),
]
BY_ID = {s.id: s for s in SHAPES}


def _bpe(byte_level: bool, specials: list[str], size: int) -> tuple[dict, list]:
    """(vocab, merges) of a BPE trained on TEXTS: byte-level (BART) or over ▁-marked words (NLLB)."""
    tok = Tokenizer(models.BPE())
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        extra = dict(initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        extra = {}
    tok.train_from_iterator(TEXTS * 3, trainers.BpeTrainer(vocab_size=size, special_tokens=specials,
                                                          show_progress=False, **extra))
    spec = json.loads(tok.to_str())
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    return spec["model"]["vocab"], [tuple(m.split(" ")) for m in merges]


def _unigram(size: int) -> list[tuple[str, float]]:
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.train_from_iterator(TEXTS * 3, trainers.UnigramTrainer(vocab_size=size, show_progress=False,
                                                              special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                                              unk_token="<unk>"))
    return unigram_pieces(tok, 4)


def make_tokenizer(family: str, folder: Path):
    from transformers import M2M100Tokenizer, MBartTokenizer, NllbTokenizer, RobertaTokenizer
    if family == "bart":
        vocab, merges = _bpe(True, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], 300)
        return RobertaTokenizer(vocab=vocab, merges=merges)
    if family == "mbart":
        vocab = _unigram(160)
        return MBartTokenizer(vocab=vocab + [(c, 0.0) for c in MBART_CODES] + [("<mask>", 0.0)],
                              additional_special_tokens=MBART_CODES, src_lang="zh_CN", tgt_lang="en_XX")
    if family == "nllb":
        vocab, merges = _bpe(False, ["<s>", "<pad>", "</s>", "<unk>"], 200)
        for c in NLLB_CODES + ["<mask>"]:
            vocab[c] = len(vocab)
        return NllbTokenizer(vocab=vocab, merges=merges, extra_special_tokens=NLLB_CODES,
                             src_lang="zho_Hans", tgt_lang="eng_Latn")
    import sentencepiece as spm                                   # m2m_100: SentencePiece + vocab.json
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS * 30), model_prefix=str(folder / "_sp"),
                                   vocab_size=150, model_type="bpe", hard_vocab_limit=False, minloglevel=2,
                                   bos_id=0, pad_id=1, eos_id=2, unk_id=3)
    sp = spm.SentencePieceProcessor(model_file=str(folder / "_sp.model"))
    (folder / "_sp.model").rename(folder / "sentencepiece.bpe.model")
    (folder / "_sp.vocab").unlink()
    (folder / "vocab.json").write_text(json.dumps({sp.id_to_piece(i): i for i in range(sp.get_piece_size())}),
                                       encoding="utf-8")
    return M2M100Tokenizer(str(folder / "vocab.json"), str(folder / "sentencepiece.bpe.model"), src_lang="zh",
                           tgt_lang="en")


CONFIGS = {"bart": "BartConfig", "mbart": "MBartConfig", "m2m_100": "M2M100Config", "nllb": "M2M100Config"}
MODELS = {"bart": "BartForConditionalGeneration", "mbart": "MBartForConditionalGeneration",
          "m2m_100": "M2M100ForConditionalGeneration", "nllb": "M2M100ForConditionalGeneration"}


def build(shape: Shape, folder) -> Path:
    """Save shape's tiny random model, its tokenizer (transformers' own class) and generation_config.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer(shape.family, folder)
    tok.save_pretrained(folder)
    enc, dec = shape.layers
    start = tok.convert_tokens_to_ids("</s>")
    vocab = len(tok)
    if shape.family == "m2m_100":              # M2M100's language codes and made-up words follow its vocab.json
        vocab = tok.encoder_size + len(tok.lang_token_to_id) + tok.num_madeup_words
    cfg = getattr(transformers, CONFIGS[shape.family])(
        vocab_size=vocab, d_model=shape.d_model, encoder_layers=enc, decoder_layers=dec,
        encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads, encoder_ffn_dim=2 * shape.d_model,
        decoder_ffn_dim=2 * shape.d_model, max_position_embeddings=64, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, decoder_start_token_id=start,
        forced_eos_token_id=tok.eos_token_id, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        **shape.config)
    cfg._attn_implementation = "eager"
    torch.manual_seed(shape.seed)
    model = getattr(transformers, MODELS[shape.family])(cfg).eval()
    g = torch.Generator().manual_seed(shape.seed)
    randomize_marian(model, g)
    with torch.no_grad():
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.copy_(0.3 * torch.randn(model.final_logits_bias.shape, generator=g))
    model.generation_config.num_beams = 1
    for k, v in shape.generation.items():
        setattr(model.generation_config, k, v)
    reach_eos(model, tok, shape.family)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def start_kwargs(family: str, tok) -> dict:
    """generate()'s keywords for the tokenizer's target language: mBART (MBartTokenizer) starts the decoder from
    the code, the others force it after </s> (forced_bos_token_id); {} for BART."""
    if family == "bart":
        return {}
    code = tok.convert_tokens_to_ids(f"__{tok.tgt_lang}__" if family == "m2m_100" else tok.tgt_lang)
    return {"decoder_start_token_id": code} if family == "mbart" else {"forced_bos_token_id": code}


def reach_eos(model, tok, family: str) -> None:
    """Make greedy decoding end at different lengths on different texts, where a β does it: the decoder's last norm
    gets a bias along </s>'s (tied) row, raising its logit by β (its own input row, the decoder's start, stays), for
    the first β with which the first texts end at different lengths, one of them early."""
    eos, kw = tok.eos_token_id, start_kwargs(family, tok)
    last = model.model.decoder.layer_norm if family != "bart" else model.model.decoder.layers[-1].final_layer_norm

    def lengths():
        return [len(model.generate(**tok(text, return_tensors="pt"), num_beams=1, do_sample=False, max_length=20,
                                   **kw)[0]) for text in TEXTS[:6]]
    with torch.no_grad():
        row = model.get_output_embeddings().weight[eos]
        original = last.bias.clone()

        def fits(beta):
            last.bias.copy_(original + beta * row / row.square().sum())
            got = lengths()
            return min(got) >= 3 and any(5 <= n < 18 for n in got) and max(got) > min(got)
        lo = 1.0
        for hi in (1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0):      # a coarse step, then finer ones where it tips
            for beta in [hi] + [lo + (hi - lo) * i / 6 for i in range(1, 6)]:
                if fits(beta):
                    return
            lo = hi
        last.bias.copy_(original)                   # none: every text runs to the limit (beam scores still differ)


def load(shape: Shape, folder):
    """(transformers' model in float32 with eager attention, its own tokenizer) from a saved folder."""
    model = getattr(transformers, MODELS[shape.family]).from_pretrained(folder, attn_implementation="eager",
                                                                         dtype=torch.float32).eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder)
