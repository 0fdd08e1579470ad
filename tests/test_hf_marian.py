"""Marian (the opus-mt translators) against transformers' own MarianMTModel and MarianTokenizer, on a tiny random
model: source ids, logits (1e-4), encoder, decoder and cross-attention patterns (1e-5), and greedy ids equal to
generate() with the folder's generation_config (decoding from the pad id, bad_words_ids, forced_eos_token_id)."""
from __future__ import annotations

import json

import pytest
import sentencepiece as spm
import torch

from hf_util import randomize_marian
from viz_transformer import decode, DecodeSettings, load_checkpoint

pytestmark = pytest.mark.slow          # transformers' import: kept out of the fast tier

TEXTS = ["我是一名工程师。", "我是学生。", "我爱你。", "今天天气很好。", "I am an engineer.", "I love you.",
         "The weather is nice today.", "他是我的朋友。"]


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer  # a slow import: only where it runs
    folder = tmp_path_factory.mktemp("marian")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS * 30), model_prefix=str(folder / "sp"), vocab_size=80,
                                   hard_vocab_limit=False, unk_id=1, bos_id=-1, eos_id=0, pad_id=-1,
                                   minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sp.model"))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    vocab["<pad>"] = len(vocab)
    (folder / "sp.model").rename(folder / "source.spm")
    (folder / "target.spm").write_bytes((folder / "source.spm").read_bytes())
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tok = MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"))
    tok.save_pretrained(folder)
    pad = vocab["<pad>"]
    cfg = MarianConfig(vocab_size=len(vocab), d_model=48, encoder_layers=2, decoder_layers=2, encoder_attention_heads=3,
                       decoder_attention_heads=3, encoder_ffn_dim=96, decoder_ffn_dim=96, max_position_embeddings=64,
                       activation_function="swish", scale_embedding=True, pad_token_id=pad, eos_token_id=0,
                       decoder_start_token_id=pad, forced_eos_token_id=0)
    cfg._attn_implementation = "eager"
    model = MarianMTModel(cfg).eval()
    g = torch.Generator().manual_seed(0)
    randomize_marian(model, g)                     # every parameter random (HF's init: biases 0, norms 1)
    with torch.no_grad():
        model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=g))
    model.generation_config.bad_words_ids = [[pad]]
    model.generation_config.num_beams = 1
    model.save_pretrained(folder, safe_serialization=True)
    return model, tok, load_checkpoint(folder)


def test_source_ids_are_marians(marian):
    _, tok, hm = marian
    for text in TEXTS + [">>eng<< 我爱你。", "emoji 🙂 and <b>markup</b>"]:
        assert hm.tokenizer.encode(text) == tok(text).input_ids, text


def test_logits_and_every_pattern(marian):
    ref, tok, hm = marian
    pad = tok.pad_token_id
    for text in TEXTS[:4]:
        src = tok(text).input_ids
        dec = [pad] + tok(TEXTS[4]).input_ids[:5]
        with torch.no_grad():
            theirs = ref(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec]), output_attentions=True)
            logits, cache = hm.model.run_with_cache(torch.tensor([src]), torch.tensor([dec]))
        torch.testing.assert_close(logits, theirs.logits, atol=1e-4, rtol=1e-4)
        assert theirs.decoder_attentions[0].max(-1).values.mean() > 0.5          # peaked: a real reference
        for i in range(2):
            for ours, hf in ((f"encoder.{i}.self_attn", theirs.encoder_attentions[i]),
                             (f"decoder.{i}.self_attn", theirs.decoder_attentions[i]),
                             (f"decoder.{i}.cross_attn", theirs.cross_attentions[i])):
                torch.testing.assert_close(cache[f"{ours}.hook_pattern"], hf, atol=1e-5, rtol=1e-5)


def test_greedy_equals_generate_with_the_generation_config(marian):
    ref, tok, hm = marian
    for text in TEXTS:
        for n in (3, 10):
            theirs = ref.generate(**tok(text, return_tensors="pt"), max_new_tokens=n)[0, 1:].tolist()
            assert decode(hm, text, DecodeSettings("greedy", max_new_tokens=n)).output_ids == theirs, (text, n)
    out = decode(hm, TEXTS[0], DecodeSettings("greedy", max_new_tokens=6))
    assert out.output_ids[-1] == hm.cfg.eos_id                                # forced_eos at the last step
    assert tok.pad_token_id not in out.output_ids                              # bad_words_ids


def test_dropping_the_logits_bias_or_the_positions_layout_breaks_parity(marian):
    ref, tok, hm = marian
    src, dec = tok(TEXTS[0]).input_ids, [tok.pad_token_id, 5, 7]
    with torch.no_grad():
        want = ref(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec])).logits
        bias = hm.model.logits_bias.clone()
        hm.model.logits_bias.zero_()
        assert (hm.model(torch.tensor([src]), torch.tensor([dec])) - want).abs().max() > 1e-3
        hm.model.logits_bias.copy_(bias)
        table = hm.model.src_embed.pos.table.clone()
        hm.model.src_embed.pos.table.copy_(torch.cat([table[:, 0::2], table[:, 1::2]], 1))   # another layout
        assert (hm.model(torch.tensor([src]), torch.tensor([dec])) - want).abs().max() > 1e-3
        hm.model.src_embed.pos.table.copy_(table)
        torch.testing.assert_close(hm.model(torch.tensor([src]), torch.tensor([dec])), want, atol=1e-4, rtol=1e-4)
