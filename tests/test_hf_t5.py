"""T5 and mT5 against transformers' own T5ForConditionalGeneration / MT5ForConditionalGeneration and
tokenizer, on tiny random folders saved by transformers (tests/hf_t5_util.py: v1.0 settings, v1.1 settings, an mT5
with spiece.model alone; every norm and the position bias random): source ids, logits (1e-4), every encoder,
decoder and cross-attention pattern (1e-5), the captured position bias against compute_bias, cached decoding
against the full forward, greedy and beam ids equal to generate() with the folder's generation_config."""
from __future__ import annotations

import pytest
import torch

import hf_t5_util as U
from viz_transformer import decode, DecodeSettings, load_checkpoint
from viz_transformer.core.hf_t5 import t5_config

pytestmark = pytest.mark.slow          # transformers' import: kept out of the fast tier


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    """shape id -> (transformers model, its tokenizer, our HookedModel), each built once."""
    root, memo = tmp_path_factory.mktemp("t5"), {}

    def get(shape_id):
        if shape_id not in memo:
            folder = U.build_t5(U.T5_BY_ID[shape_id], root / shape_id)
            ref, tok = U.load_t5(folder)
            memo[shape_id] = (ref, tok, load_checkpoint(folder))
        return memo[shape_id]
    return get


SHAPES = [s.id for s in U.T5_SHAPES]


@pytest.mark.parametrize("shape_id", SHAPES)
def test_source_ids_are_transformers(t5, shape_id):
    _, tok, hm = t5(shape_id)
    for text in U.TEXTS + ["emoji 🙂 and <b>markup</b>", "<extra_id_0> a blank <extra_id_3>.", "  two  spaces "]:
        assert hm.tokenizer.encode(text) == tok(text).input_ids, text


def _forward(ref, hm, src, dec):
    with torch.no_grad():
        theirs = ref(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec]), output_attentions=True)
        logits, cache = hm.model.run_with_cache(torch.tensor([src]), torch.tensor([dec]))
    return theirs, logits, cache


@pytest.mark.parametrize("shape_id", SHAPES)
def test_logits_and_every_pattern(t5, shape_id):
    ref, tok, hm = t5(shape_id)
    enc, dec_layers = U.T5_BY_ID[shape_id].layers
    for text in U.TEXTS[:3]:
        src, dec = tok(text).input_ids, [0] + tok(U.TEXTS[3]).input_ids[:6]
        theirs, logits, cache = _forward(ref, hm, src, dec)
        torch.testing.assert_close(logits, theirs.logits, atol=1e-4, rtol=1e-4)
        assert theirs.encoder_attentions[0].max(-1).values.mean() > 0.5          # peaked: a real reference
        pairs = [(f"encoder.{i}.self_attn", theirs.encoder_attentions[i]) for i in range(enc)]
        pairs += [(f"decoder.{i}.{a}", getattr(theirs, w)[i]) for i in range(dec_layers)
                  for a, w in (("self_attn", "decoder_attentions"), ("cross_attn", "cross_attentions"))]
        for ours, hf in pairs:
            torch.testing.assert_close(cache[f"{ours}.hook_pattern"], hf, atol=1e-5, rtol=1e-5, msg=ours)


@pytest.mark.parametrize("shape_id", SHAPES)
def test_captured_bias_is_compute_bias(t5, shape_id):
    """Layer 0's bias, captured once a stack, is transformers' compute_bias (both ways in the encoder, causal
    in the decoder; no bias module in any other layer nor in cross-attention)."""
    ref, tok, hm = t5(shape_id)
    src, dec = tok(U.TEXTS[4]).input_ids, [0] + tok(U.TEXTS[0]).input_ids
    _, _, cache = _forward(ref, hm, src, dec)
    enc_attn = ref.encoder.block[0].layer[0].SelfAttention
    dec_attn = ref.decoder.block[0].layer[0].SelfAttention
    with torch.no_grad():
        torch.testing.assert_close(cache["encoder.0.self_attn.hook_bias"], enc_attn.compute_bias(len(src), len(src)))
        torch.testing.assert_close(cache["decoder.0.self_attn.hook_bias"], dec_attn.compute_bias(len(dec), len(dec)))
        # the query offset of cached decoding: the last 3 rows of a 9-key decoder, as transformers computes them
        ours = hm.model.decoder[0].self_attn.rel_bias(3, 9, offset=6)
        torch.testing.assert_close(ours, dec_attn.compute_bias(3, 9, past_seen_tokens=6))
    names = [n for n in hm.model.hook_names if n.endswith("hook_bias")]
    assert names == ["encoder.0.self_attn.hook_bias", "decoder.0.self_attn.hook_bias"]
    assert len(src) > U.T5_BY_ID[shape_id].buckets                             # past the exact buckets


@pytest.mark.parametrize("shape_id", SHAPES)
def test_cached_decoding_equals_the_full_forward(t5, shape_id):
    _, tok, hm = t5(shape_id)
    src, dec = torch.tensor([tok(U.TEXTS[1]).input_ids]), torch.tensor([[0] + tok(U.TEXTS[2]).input_ids[:7]])
    with torch.no_grad():
        full = hm.model(src, dec)
        cache = hm.model.new_cache(src)
        steps = [hm.model.decode(dec[:, :3], cache=cache)] + [hm.model.decode(dec[:, t:t + 1], cache=cache)
                                                               for t in range(3, dec.shape[1])]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape_id", SHAPES)
def test_greedy_and_beam_equal_generate(t5, shape_id):
    ref, tok, hm = t5(shape_id)
    for text in U.TEXTS:
        with torch.no_grad():
            greedy = ref.generate(**tok(text, return_tensors="pt"), do_sample=False, num_beams=1,
                                  max_new_tokens=8)[0, 1:].tolist()
            beam = ref.generate(**tok(text, return_tensors="pt"), do_sample=False)[0, 1:].tolist()   # its config
        assert decode(hm, text, DecodeSettings("greedy", max_new_tokens=8)).output_ids == greedy, text
        assert decode(hm, text, DecodeSettings("beam")).output_ids == beam, text


def test_the_bias_the_scale_and_the_divisor_each_matter(t5):
    """Without the position bias, with √d scaling, or without the tied output's rescaling, the logits move:
    the parity above tests each of them."""
    ref, tok, hm = t5("t5-v1.0-relu-tied")
    src, dec = torch.tensor([tok(U.TEXTS[0]).input_ids]), torch.tensor([[0, 5, 7, 9]])
    model = hm.model
    with torch.no_grad():
        want = ref(input_ids=src, decoder_input_ids=dec).logits
        torch.testing.assert_close(model(src, dec), want, atol=1e-4, rtol=1e-4)
        w = model.encoder[0].self_attn.rel_bias.weight
        kept = w.clone()
        w.zero_()
        assert (model(src, dec) - want).abs().max() > 1e-2
        w.copy_(kept)
        attn = model.decoder[1].self_attn
        attn.divisor = None                                                   # √d_head, as other families
        assert (model(src, dec) - want).abs().max() > 1e-2
        attn.divisor = 1.0
        model.cfg.output_scale = False
        assert (model(src, dec) - want).abs().max() > 1e-2
        model.cfg.output_scale = True
        torch.testing.assert_close(model(src, dec), want, atol=1e-4, rtol=1e-4)


def test_unsupported_t5_variants_say_so_in_one_line():
    from viz_transformer.core.checkpoint_files import CheckpointError
    common = dict(pad_id=0, eos_id=1, bos_id=-1, vocab_size=64)
    raw = dict(model_type="t5", d_model=16, d_kv=4, d_ff=32, num_heads=4, num_layers=1, vocab_size=64)
    for bad in (dict(feed_forward_proj="gated-gelu-x"), dict(feed_forward_proj="tanh"), dict(is_encoder_decoder=False)):
        with pytest.raises(CheckpointError) as e:
            t5_config({**raw, **bad}, {}, common)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("shape_id", ["t5-v1.0-relu-tied", "mt5-gated-gelu-spiece"])
def test_a_lean_run_recomputes_every_pattern_with_the_bias_and_divisor(t5, shape_id):
    """The app's lean run stores no T5 score or pattern: each is recomputed from q, k, v, mask, the stack's bias
    and divisor 1, and reads back what a full capture holds, bit for bit; one head's pattern alone
    (analysis.patterns.head_pattern) is transformers' output_attentions."""
    from viz_transformer.analysis.patterns import head_pattern
    from viz_transformer.core.hook_names import hook_name
    ref, tok, hm = t5(shape_id)
    text = U.TEXTS[3]
    full, lean = hm.run(text), hm.run(text, lean=True)
    derivable = [n for n in full.cache.keys() if n.endswith((".hook_scores", ".hook_pattern"))]
    assert derivable and set(derivable) <= set(lean.cache.derived)            # none stored whole
    for name in full.cache.keys():
        if name in lean.cache:
            assert torch.equal(lean.cache[name], full.cache[name]), name
    theirs, _, _ = _forward(ref, hm, full.src_ids, full.tgt_ids)
    for block, hf in (("encoder.self_attn", theirs.encoder_attentions), ("decoder.self_attn", theirs.decoder_attentions),
                      ("decoder.cross_attn", theirs.cross_attentions)):
        for head in (0, 2):
            torch.testing.assert_close(head_pattern(lean.cache, block, 1, head), hf[1][0, head], atol=1e-5, rtol=1e-5)


def test_positions_off_takes_the_bias_out(t5):
    """The positions page's intervention on T5: the stack's bias is zero, so each pattern is softmax(q·k) alone
    (a softmax written here over the captured q and k; divisor 1), and the model's logits change."""
    from viz_transformer.run.interventions import positions_off_hooks
    _, tok, hm = t5("t5-v1.1-gated-gelu")
    src, dec = torch.tensor([tok(U.TEXTS[3]).input_ids]), torch.tensor([[0, 5, 7, 9]])
    hooks = positions_off_hooks(hm)
    assert {n for n, _ in hooks} == {"encoder.0.self_attn.hook_bias", "decoder.0.self_attn.hook_bias"}
    with torch.no_grad():
        on = hm.model(src, dec)
        off = hm.model.run_with_hooks(src, dec, fwd_hooks=hooks)
        _, cache = hm.model.run_with_cache(src, dec)
        from viz_transformer.core.hooks import hooks_active
        with hooks_active(hm.model.resolve_hooks(hooks)):
            _, off_cache = hm.model.run_with_cache(src, dec)
    assert (on - off).abs().max() > 1e-2
    assert not off_cache["encoder.0.self_attn.hook_bias"].any() and cache["encoder.0.self_attn.hook_bias"].any()
    q, k = off_cache["encoder.1.self_attn.hook_q"][0], off_cache["encoder.1.self_attn.hook_k"][0]   # (T, nh, hs)
    want = torch.softmax(torch.einsum("qhd,khd->hqk", q, k), -1)
    torch.testing.assert_close(off_cache["encoder.1.self_attn.hook_pattern"][0], want, atol=1e-5, rtol=1e-5)


def test_an_output_matrix_of_its_own(t5, tmp_path):
    """FLAN-T5 and mT5 checkpoints keep an lm_head.weight apart from the shared embedding (transformers 5 saves a
    tied one): saved beside it, our model reads it as the output while both stacks keep the shared embedding. The
    reference: transformers' model with that matrix put in its lm_head."""
    import shutil

    from safetensors.torch import load_file, save_file
    ref, tok, built = t5("t5-v1.1-gated-gelu")
    folder = tmp_path / "own-head"
    shutil.copytree(built.path, folder)
    state = load_file(folder / "model.safetensors")
    head = torch.randn(state["shared.weight"].shape, generator=torch.Generator().manual_seed(7))
    save_file({**state, "lm_head.weight": head}, folder / "model.safetensors", metadata={"format": "pt"})
    hm = load_checkpoint(folder)
    assert not hm.cfg.tie_embeddings and not hm.cfg.output_scale
    src, dec = torch.tensor([tok(U.TEXTS[2]).input_ids]), torch.tensor([[0, 4, 9, 11]])
    with torch.no_grad():
        own = torch.nn.Linear(ref.config.d_model, head.shape[0], bias=False)
        own.weight = torch.nn.Parameter(head)
        tied, ref.lm_head = ref.lm_head, own
        try:
            want = ref(input_ids=src, decoder_input_ids=dec).logits
        finally:
            ref.lm_head = tied
        torch.testing.assert_close(hm.model(src, dec), want, atol=1e-4, rtol=1e-4)
        assert torch.equal(hm.model.src_embed.W_E.weight, hm.model.tgt_embed.W_E.weight)


def test_a_broken_spiece_model_or_bucket_setting_is_refused_in_one_line(t5, tmp_path):
    import json
    import shutil

    from viz_transformer.core.checkpoint_files import CheckpointError
    _, _, built = t5("mt5-gated-gelu-spiece")
    folder = tmp_path / "broken"
    shutil.copytree(built.path, folder)
    (folder / "spiece.model").write_bytes(b"\x00not a sentencepiece model" * 10)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(folder)
    assert "spiece.model" in str(e.value) and "\n" not in str(e.value)
    shutil.copy(built.path / "spiece.model", folder / "spiece.model")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "relative_attention_max_distance": 2}))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(folder)
    assert "rel_max_distance" in str(e.value) and "\n" not in str(e.value)
