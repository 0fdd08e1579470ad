"""Marian against transformers' own MarianMTModel and MarianTokenizer, on tiny random models
(tests/hf_util.py MARIAN_SHAPES: 1-3 layers, 2-4 heads, one with separate source and target vocabularies):

  - beam search gives the ids generate(num_beams=k, do_sample=False) gives, for k = 2 … 5, each
    early_stopping value (True, False, "never") and length penalties ≠ 1, and, called with nothing but the
    strategy, what generate() gives under the folder's generation_config.json (num_beams, early_stopping,
    length_penalty, max_length / max_new_tokens, bad_words_ids, forced_eos_token_id);
  - with separate vocabularies (share_encoder_decoder_embeddings false, decoder_vocab_size, source.spm +
    vocab.json, target.spm + target_vocab.json): source and target ids, pieces and decoded text as
    MarianTokenizer(separate_vocabs=True) gives them, logits (1e-4), every attention pattern (1e-5), greedy ids.
Where two hypotheses tie exactly, either may win: a different answer is accepted only when its length-normalised
score equals transformers' sequences_scores.
"""
from __future__ import annotations

import json

import pytest
import torch

import hf_util as H
from viz_transformer import decode, DecodeSettings, load_checkpoint

pytestmark = pytest.mark.slow          # transformers' Marian on a busy CPU: about a minute

TEXTS = H.MARIAN_SRC[:2]
# (num_beams, early_stopping, length_penalty): every width 2-5, every early_stopping value, penalties ≠ 1
CASES = [(2, True, 0.5), (3, False, 2.0), (4, "never", 1.5), (5, False, 0.6), (3, "never", -0.5), (4, True, 1.0)]
NEW = 10


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """shape id -> (transformers model, MarianTokenizer, our HookedModel, folder), each built once."""
    root, memo = tmp_path_factory.mktemp("marian"), {}

    def get(shape_id):
        if shape_id not in memo:
            folder = H.build_marian(H.MARIAN_BY_ID[shape_id], root / shape_id)
            ref, tok = H.load_marian(folder)
            memo[shape_id] = (ref, tok, load_checkpoint(folder), folder)
        return memo[shape_id]
    return get


def hf_beam(ref, tok, text, **kw):
    """(generated ids, sequences_score) from transformers."""
    with torch.no_grad():
        out = ref.generate(**tok(text, return_tensors="pt"), do_sample=False, return_dict_in_generate=True,
                           output_scores=True, **kw)
    score = float(out.sequences_scores[0]) if getattr(out, "sequences_scores", None) is not None else None
    return out.sequences[0, 1:].tolist(), score


def our_norm_score(trace, length_penalty) -> float:
    ids = trace.output_ids
    beam = next(b for b in trace.beam_history[len(ids) - 1] if b.tokens == ids)
    return beam.score / len(ids) ** length_penalty


def same_or_tie(trace, theirs, score, length_penalty, what):
    if trace.output_ids != theirs:
        assert score is not None and abs(our_norm_score(trace, length_penalty) - score) < 1e-5, \
            (what, trace.output_ids, theirs)


@pytest.mark.parametrize("shape_id", [s.id for s in H.MARIAN_SHAPES])
def test_beam_search_equals_generate(marian, shape_id):
    ref, tok, hm, _ = marian(shape_id)
    for text in TEXTS:
        for k, early, lp in CASES:
            theirs, score = hf_beam(ref, tok, text, num_beams=k, early_stopping=early, length_penalty=lp,
                                    max_new_tokens=NEW)
            trace = decode(hm, text, DecodeSettings("beam", beam_width=k, early_stopping=early, length_penalty=lp,
                                                    max_new_tokens=NEW))
            same_or_tie(trace, theirs, score, lp, (text, k, early, lp))


@pytest.mark.parametrize("shape_id", [s.id for s in H.MARIAN_SHAPES])
def test_the_generation_config_is_applied_to_both(marian, shape_id):
    """decode(hm, text, DecodeSettings("beam")), no other knob set, = generate() with none: both read
    generation_config.json."""
    ref, tok, hm, folder = marian(shape_id)
    gen = json.loads((folder / "generation_config.json").read_text())
    assert hm.cfg.num_beams == gen["num_beams"] and hm.cfg.length_penalty == gen.get("length_penalty", 1.0)
    early = hm.cfg.early_stopping
    assert early == {True: "true", False: "false", "never": "never"}[gen.get("early_stopping", False)]
    for text in TEXTS:
        theirs, score = hf_beam(ref, tok, text)
        trace = decode(hm, text, DecodeSettings("beam"))
        same_or_tie(trace, theirs, score, hm.cfg.length_penalty, text)
        assert len(trace.output_ids) <= (gen.get("max_new_tokens") or gen["max_length"] - 1)


def test_early_stopping_changes_the_answer_and_both_rules_match(marian):
    """The rules differ on these models (so the test above can tell them apart), and each matches."""
    ref, tok, hm, _ = marian("marian-3heads")
    differs = 0
    for text in H.MARIAN_SRC[:4]:
        outs = {}
        for early in (True, False):
            theirs, score = hf_beam(ref, tok, text, num_beams=3, early_stopping=early, max_new_tokens=12)
            trace = decode(hm, text, DecodeSettings("beam", beam_width=3, early_stopping=early, length_penalty=1.0,
                                                    max_new_tokens=12))
            same_or_tie(trace, theirs, score, 1.0, (text, early))
            outs[early] = theirs
        differs += outs[True] != outs[False]
    assert differs


def test_an_unknown_early_stopping_is_refused(marian):
    _, _, hm, _ = marian("marian-3heads")
    with pytest.raises(ValueError, match="early_stopping"):
        decode(hm, TEXTS[0], DecodeSettings("beam", early_stopping="sometimes"))


# -- separate source and target vocabularies ----------------------------------------------------------------
SEP = "marian-separate-vocabs"


def test_separate_vocabularies_make_two_embeddings(marian):
    ref, _, hm, folder = marian(SEP)
    raw = json.loads((folder / "config.json").read_text())
    assert raw["vocab_size"] != raw["decoder_vocab_size"] and not raw["share_encoder_decoder_embeddings"]
    assert hm.cfg.vocab_size == raw["vocab_size"] and hm.cfg.tgt_vocab_size == raw["decoder_vocab_size"]
    m = hm.model
    assert m.src_embed.W_E.weight.shape[0] == raw["vocab_size"]
    assert m.tgt_embed.W_E.weight.shape[0] == m.lm_head.weight.shape[0] == raw["decoder_vocab_size"]
    assert m.lm_head.weight is m.tgt_embed.W_E.weight                 # tied to the target side, as Marian's
    torch.testing.assert_close(m.src_embed.W_E.weight, ref.model.encoder.embed_tokens.weight)
    torch.testing.assert_close(m.tgt_embed.W_E.weight, ref.model.decoder.embed_tokens.weight)


def test_separate_vocabularies_tokenize_as_marian(marian):
    _, tok, hm, folder = marian(SEP)
    src_vocab = {v: k for k, v in json.loads((folder / "vocab.json").read_text()).items()}
    ours = hm.tokenizer
    for text in H.MARIAN_SRC + H.MARIAN_TGT + [">>eng<< 我爱你。", "emoji 🙂 and <b>markup</b>"]:
        src = tok(text).input_ids
        assert ours.encode(text) == src, text
        assert ours.src_pieces(src) == [src_vocab[i] for i in src]          # the source vocabulary's pieces
        tgt = tok(text_target=text).input_ids
        assert ours.encode_target(text) == tgt, text
        assert ours.pieces(tgt) == tok.convert_ids_to_tokens(tgt)           # the target vocabulary's pieces
        assert ours.decode(tgt) == tok.decode(tgt, skip_special_tokens=True)
    assert ours.src_pieces([5]) != ours.pieces([5])                         # the two sides really differ


def test_separate_vocabularies_logits_patterns_and_greedy(marian):
    ref, tok, hm, _ = marian(SEP)
    for text in H.MARIAN_SRC[:3]:
        src = tok(text).input_ids
        dec = [tok.pad_token_id] + tok(text_target=H.MARIAN_TGT[0]).input_ids[:5]
        with torch.no_grad():
            theirs = ref(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec]), output_attentions=True)
            logits, cache = hm.model.run_with_cache(torch.tensor([src]), torch.tensor([dec]))
        assert logits.shape[-1] == hm.cfg.tgt_vocab_size
        torch.testing.assert_close(logits, theirs.logits, atol=1e-4, rtol=1e-4)
        for i in range(len(theirs.decoder_attentions)):
            for ours, hf in ((f"decoder.{i}.self_attn", theirs.decoder_attentions[i]),
                             (f"decoder.{i}.cross_attn", theirs.cross_attentions[i])):
                torch.testing.assert_close(cache[f"{ours}.hook_pattern"], hf, atol=1e-5, rtol=1e-5)
        for i in range(len(theirs.encoder_attentions)):
            torch.testing.assert_close(cache[f"encoder.{i}.self_attn.hook_pattern"], theirs.encoder_attentions[i],
                                       atol=1e-5, rtol=1e-5)
        want = ref.generate(**tok(text, return_tensors="pt"), num_beams=1, max_new_tokens=8)[0, 1:].tolist()
        trace = decode(hm, text, DecodeSettings("greedy", max_new_tokens=8))
        assert trace.output_ids == want
        assert trace.src_pieces == hm.tokenizer.src_pieces(src)


def test_a_forced_target_is_cut_by_the_target_side(marian):
    _, tok, hm, _ = marian(SEP)
    run = hm.run(H.MARIAN_SRC[0], target=H.MARIAN_TGT[0])
    ids = tok(text_target=H.MARIAN_TGT[0]).input_ids
    assert run.output_ids == ids and run.tgt_pieces[1:] == tok.convert_ids_to_tokens(ids)
    assert run.src_pieces == hm.tokenizer.src_pieces(tok(H.MARIAN_SRC[0]).input_ids)


def test_a_wider_configured_beam_is_capped_not_refused(marian, tmp_path):
    """A generation config's num_beams above our limit (16): greedy still runs, beam search uses 16 beams."""
    import shutil
    from viz_transformer.core.encoding import MAX_BEAM
    _, _, hm, folder = marian("marian-3heads")
    copy = tmp_path / "wide"
    shutil.copytree(folder, copy)
    gen = json.loads((copy / "generation_config.json").read_text())
    (copy / "generation_config.json").write_text(json.dumps(dict(gen, num_beams=MAX_BEAM * 2)))
    wide = load_checkpoint(copy)
    assert wide.cfg.num_beams == MAX_BEAM * 2
    assert decode(wide, TEXTS[0], DecodeSettings("greedy", max_new_tokens=4)).output_ids == \
        decode(hm, TEXTS[0], DecodeSettings("greedy", max_new_tokens=4)).output_ids
    trace = decode(wide, TEXTS[0], DecodeSettings("beam", max_new_tokens=3))
    widest = DecodeSettings("beam", beam_width=MAX_BEAM, max_new_tokens=3)
    assert trace.output_ids == decode(hm, TEXTS[0], widest).output_ids
    assert max(sum(not b.finished for b in step) for step in trace.beam_history) <= MAX_BEAM
