"""BART, mBART, M2M100 and an NLLB-style M2M100 against transformers' own models and tokenizers, on tiny random
folders (tests/hf_bart_util.py): source ids (Chinese, English, mixed; each language pair), logits (1e-4), encoder,
decoder and cross-attention patterns (1e-5), greedy and beam ids equal to generate() (the decoder started as it
starts: decoder_start_token_id, then forced_bos_token_id, the target language's code), language codes chosen per
HookedModel (with_languages), and the family features each one needs (removing one breaks agreement)."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

import hf_bart_util as B
from viz_transformer import CheckpointError, decode, DecodeSettings, load_checkpoint
from viz_transformer.core.hf_languages import default_languages

pytestmark = pytest.mark.slow          # transformers' models on a busy CPU


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """shape id -> (transformers model, its tokenizer, our HookedModel, folder), each built once."""
    root, memo = tmp_path_factory.mktemp("bart"), {}

    def get(shape_id):
        if shape_id not in memo:
            shape = B.BY_ID[shape_id]
            folder = B.build(shape, root / shape_id)
            ref, tok = B.load(shape, folder)
            memo[shape_id] = (ref, tok, load_checkpoint(folder), folder)
        return memo[shape_id]
    return get


IDS = [s.id for s in B.SHAPES]
LANGUAGE_IDS = [s.id for s in B.SHAPES if s.family != "bart"]
OTHER = {"mbart": ("en_XX", "fr_XX"), "m2m_100": ("en", "fr"), "nllb": ("eng_Latn", "deu_Latn")}


def _theirs_for(tok, family, src, tgt):
    """transformers' tokenizer set to src -> tgt (its own setters), and generate()'s keywords for tgt."""
    tok.src_lang, tok.tgt_lang = src, tgt
    return B.start_kwargs(family, tok)


def _folder_default(tok, hm, family):
    """transformers' tokenizer set back to the folder's own pair (as our tokenizer opens it); generate()'s keywords."""
    if hm.languages is not None:
        tok.src_lang, tok.tgt_lang = hm.languages
    return B.start_kwargs(family, tok)


@pytest.mark.parametrize("shape_id", IDS)
def test_source_ids_are_transformers(family, shape_id):
    ref, tok, hm, _ = family(shape_id)
    _folder_default(tok, hm, B.BY_ID[shape_id].family)
    for text in B.TEXTS:
        assert hm.tokenizer.encode(text) == tok(text).input_ids, text
    if hm.languages is not None:                          # another pair: a new tokenizer, the first one unchanged
        src, tgt = OTHER[shape_id]
        before = hm.languages
        other = hm.with_languages(src, tgt)
        _theirs_for(tok, B.BY_ID[shape_id].family, src, tgt)
        for text in B.TEXTS[:6]:
            assert other.tokenizer.encode(text) == tok(text).input_ids, text
        assert hm.languages == before and other.languages == (src, tgt)
        assert other.model is hm.model                    # the weights are shared, never copied


@pytest.mark.parametrize("shape_id", IDS)
def test_logits_and_every_pattern(family, shape_id):
    ref, tok, hm, _ = family(shape_id)
    _folder_default(tok, hm, B.BY_ID[shape_id].family)
    start = list(hm.run(B.TEXTS[0], max_new_tokens=1).input.prompt)
    for text in (B.TEXTS[0], B.TEXTS[-2]):
        src = tok(text).input_ids
        dec = start + [i for i in tok(B.TEXTS[10]).input_ids if i not in hm.tokenizer.specials][:5]
        with torch.no_grad():
            theirs = ref(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec]), output_attentions=True)
            logits, cache = hm.model.run_with_cache(torch.tensor([src]), torch.tensor([dec]))
        torch.testing.assert_close(logits, theirs.logits, atol=1e-4, rtol=1e-4)
        assert theirs.decoder_attentions[0].max(-1).values.mean() > 0.5          # peaked: a real reference
        for i in range(len(theirs.encoder_attentions)):
            torch.testing.assert_close(cache[f"encoder.{i}.self_attn.hook_pattern"], theirs.encoder_attentions[i],
                                       atol=1e-5, rtol=1e-5)
        for i in range(len(theirs.decoder_attentions)):
            for ours, hf in ((f"decoder.{i}.self_attn", theirs.decoder_attentions[i]),
                             (f"decoder.{i}.cross_attn", theirs.cross_attentions[i])):
                torch.testing.assert_close(cache[f"{ours}.hook_pattern"], hf, atol=1e-5, rtol=1e-5)


def _generate(ref, tok, text, **kw):
    with torch.no_grad():
        return ref.generate(**tok(text, return_tensors="pt"), do_sample=False, **kw)[0].tolist()


@pytest.mark.parametrize("shape_id", IDS)
def test_greedy_and_beam_equal_generate(family, shape_id):
    """Called with nothing but the strategy, both read generation_config.json (num_beams, max_length,
    forced_bos_token_id, forced_eos_token_id); the decoder's prompt is what generate() starts with and forces."""
    ref, tok, hm, _ = family(shape_id)
    kw = _folder_default(tok, hm, B.BY_ID[shape_id].family)
    for text in B.TEXTS[:8]:
        for strategy, beams in (("greedy", 1), ("beam", hm.cfg.num_beams)):
            trace = decode(hm, text, DecodeSettings(strategy))
            assert trace.prompt_ids + trace.output_ids == _generate(ref, tok, text, num_beams=beams, **kw), \
                (strategy, text)


@pytest.mark.parametrize("shape_id", ["mbart", "nllb"])
def test_beam_knobs_count_the_forced_code_as_transformers_does(family, shape_id):
    """Length penalties ≠ 1 and every early_stopping rule: a hypothesis's length counts the forced code."""
    ref, tok, hm, _ = family(shape_id)
    kw = _folder_default(tok, hm, B.BY_ID[shape_id].family)
    for text in B.TEXTS[:6]:
        for k, early, lp in ((2, True, 0.5), (3, False, 2.0), (4, "never", 1.5), (3, "never", -0.5)):
            theirs = _generate(ref, tok, text, num_beams=k, early_stopping=early, length_penalty=lp, max_length=14,
                               **kw)
            trace = decode(hm, text, DecodeSettings("beam", beam_width=k, early_stopping=early, length_penalty=lp,
                                                    max_new_tokens=14 - len(kw and hm.tokenizer.decoder_start)))
            assert trace.prompt_ids + trace.output_ids == theirs, (text, k, early, lp)


@pytest.mark.parametrize("shape_id", LANGUAGE_IDS)
def test_another_target_language_decodes_as_generate_forced_to_it(family, shape_id):
    ref, tok, hm, _ = family(shape_id)
    src, tgt = OTHER[shape_id]
    other = hm.with_languages(src, tgt)
    kw = _theirs_for(tok, B.BY_ID[shape_id].family, src, tgt)
    for text in B.TEXTS[10:14]:
        trace = decode(other, text, DecodeSettings("greedy"))
        assert trace.prompt_ids + trace.output_ids == _generate(ref, tok, text, num_beams=1, **kw), text
    code = other.tokenizer.codes[tgt]
    assert other.run(B.TEXTS[10]).tgt_ids[:len(other.tokenizer.decoder_start)][-1] == code


def test_chinese_text_defaults_to_chinese_to_english():
    for codes, zh, en in ((["af", "en", "zh"], "zh", "en"), (["eng_Latn", "zho_Hans", "fra_Latn"], "zho_Hans", "eng_Latn"),
                          (["en_XX", "zh_CN"], "zh_CN", "en_XX")):
        assert default_languages(codes, "我爱你。") == (zh, en)
        assert default_languages(codes, "I love you.") == (en, zh)
    assert default_languages(["fr_XX", "de_DE"], "我爱你。", {"src_lang": "de_DE", "tgt_lang": "fr_XX"}) == \
        ("de_DE", "fr_XX")


def test_language_mistakes_are_one_line(family, tmp_path):
    _, _, hm, folder = family("m2m_100")
    with pytest.raises(ValueError, match="not one of this model's language codes"):
        hm.with_languages("xx", "en")
    _, _, bart, bart_folder = family("bart")
    with pytest.raises(ValueError, match="no language codes"):
        bart.with_languages("zh", "en")
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    settings = json.loads((bad / "tokenizer_config.json").read_text())
    (bad / "tokenizer_config.json").write_text(json.dumps(dict(settings, language_codes="m2m200")))
    with pytest.raises(CheckpointError, match="language_codes 'm2m200'") as e:
        load_checkpoint(bad)
    assert "\n" not in str(e.value)
    variant = tmp_path / "variant"
    shutil.copytree(bart_folder, variant)
    raw = json.loads((variant / "config.json").read_text())
    (variant / "config.json").write_text(json.dumps(dict(raw, add_final_layer_norm=True)))
    with pytest.raises(CheckpointError, match="add_final_layer_norm") as e:
        load_checkpoint(variant)
    assert "\n" not in str(e.value)


def _gap(hm, ref, src, dec) -> float:
    with torch.no_grad():
        want = ref(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec])).logits
        return float((hm.model(torch.tensor([src]), torch.tensor([dec])) - want).abs().max())


def test_removing_a_family_feature_breaks_agreement(family):
    """The offset of 2, fairseq's frequencies, the embedding norm, the √d scale and the final norm are each needed."""
    for shape_id, break_it in (("bart", lambda m: setattr(m.src_embed, "pos_offset", 0)),
                               ("mbart", lambda m: setattr(m.tgt_embed, "scale", 1.0)),
                               ("mbart", lambda m: m.src_embed.norm.weight.fill_(1.0)),
                               ("m2m_100", lambda m: m.src_embed.pos.table.copy_(
                                   __import__("viz_transformer.core.positional", fromlist=["x"]).sinusoidal_halves_table(
                                       *m.src_embed.pos.table.shape))),
                               ("nllb", lambda m: m.decoder_norm.weight.fill_(1.0))):
        ref, tok, _, folder = family(shape_id)
        hm = load_checkpoint(folder)                      # a copy of its own, to break
        _folder_default(tok, hm, B.BY_ID[shape_id].family)
        src = tok(B.TEXTS[0]).input_ids
        dec = list(hm.run(B.TEXTS[0], max_new_tokens=1).input.prompt) + [5, 7]
        assert _gap(hm, ref, src, dec) < 1e-4
        with torch.no_grad():
            break_it(hm.model)
        assert _gap(hm, ref, src, dec) > 1e-3, shape_id
