"""Parity with Hugging Face's own implementations: `load_checkpoint` opens a local transformers
model folder (config.json, *.safetensors single or sharded, tokenizer.json, generation_config.json) of the
families gpt2, llama, qwen2, qwen3 and mistral, and what it builds computes what transformers computes.

Tiny random models are built here with transformers (tests/hf_util.py: odd head counts, grouped-query
attention with 1 and 2 key/value heads, RoPE scaling linear / dynamic / yarn / llama3, head_dim ≠
hidden / heads, tied and untied embeddings, q/k/v biases, q/k norms, sliding windows, a padded vocabulary,
sharded weights, configs in transformers 4's format), with every weight random and large enough that
attention is peaked. Then, against transformers (eager attention, float32):
  - the logits agree within 1e-4 and every attention pattern within 1e-5;
  - greedy generation gives the same ids, token by token (a final eos included);
  - the tokenizer gives the ids transformers' own tokenizer gives, on Chinese, emoji, markup and spaces;
  - removing any one family feature from our loaded model breaks that agreement (the test can fail);
  - pickled weights, remote code, unknown model types and unsupported RoPE types are refused in one line.
transformers is imported, not skipped: CI fails without it (requirements-dev.txt).
"""
from __future__ import annotations

import json
import math
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import transformers  # noqa: F401  (requirements-dev: parity with Hugging Face's implementations)
from torch import nn
from transformers import AutoTokenizer

import hf_util as H
from viz_transformer import CheckpointError, decode, DecodeSettings, load_checkpoint

LOGITS_TOL, PATTERN_TOL, BROKEN = 1e-4, 1e-5, 1e-3
pytestmark = pytest.mark.slow          # transformers and 13 model folders: kept out of the fast tier

SUPPORTED = ("gpt2", "llama", "qwen2", "qwen3", "mistral")


@dataclass
class Built:
    shape: H.Shape
    folder: Path
    hf: object               # the transformers model, loaded back from the folder
    tok: object              # AutoTokenizer.from_pretrained(folder)
    ids: list                # LOGITS_TEXT as the HF tokenizer encodes it
    logits: torch.Tensor     # [T, vocab] from transformers
    patterns: list           # [heads, T, T] per layer from transformers


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """shape id -> Built (each tiny model made, saved and run through transformers once per module)."""
    root = tmp_path_factory.mktemp("hf")
    memo = {}

    def get(shape_id: str) -> Built:
        if shape_id not in memo:
            shape = H.SHAPE_BY_ID[shape_id]
            folder = H.build(shape, root / shape.id)
            hf, tok = H.load_hf(folder), AutoTokenizer.from_pretrained(folder)
            ids = tok(shape.logits_text).input_ids
            logits, patterns = H.hf_forward(hf, ids)
            memo[shape_id] = Built(shape, folder, hf, tok, ids, logits, patterns)
        return memo[shape_id]
    return get


def ours(hm, ids) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(logits [T, vocab], [pattern [heads, T, T] per layer]) from our loaded model."""
    logits, cache = hm.model.run_with_cache(torch.tensor([ids]))
    n = len(hm.model.decoder)
    return logits[0], [cache[f"decoder.{i}.self_attn.hook_pattern"][0] for i in range(n)]


def our_logits(hm, ids, **kw) -> torch.Tensor:
    with torch.no_grad():
        if kw:
            return hm.model.run_with_hooks(torch.tensor([ids]), **kw)[0]
        return hm.model(torch.tensor([ids]))[0]


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, f"shape {tuple(a.shape)} vs transformers' {tuple(b.shape)}"
    return float((a.float() - b.float()).abs().max())


SHAPE_IDS = [s.id for s in H.SHAPES]
ONE_PER_TOKENIZER = [next(s.id for s in H.SHAPES if s.tokenizer == t) for t in H.TOKENIZERS]


# -- the reference itself: random weights, peaked attention -------------------------------------------------
@pytest.mark.parametrize("shape_id", SHAPE_IDS)
def test_reference_is_random_and_peaked(built, shape_id):
    """Near-uniform attention or HF's zero biases / unit norms would let a missing feature go unnoticed."""
    b = built(shape_id)
    for name, p in b.hf.named_parameters():
        assert p.std() > 0.01 or p.numel() == 1, f"{name} is (nearly) constant"
        assert not torch.all(p == 1) and not torch.all(p == 0), f"{name} kept HF's init"
    assert H.peakedness(b.patterns) > 0.6, "attention too uniform to catch a bug"
    assert 1.0 < float(b.logits.std()) < 10.0
    assert 12 <= len(b.ids) <= H.MAX_IDS
    if b.shape.eos_reachable:
        gen = H.hf_greedy(b.hf, b.tok(H.PROMPT).input_ids, H.NEW_TOKENS)
        assert gen[-1] == b.hf.generation_config.eos_token_id and len(gen) < H.NEW_TOKENS
    if b.shape.family == "mistral":
        assert len(b.ids) > b.shape.config["sliding_window"] + 4, "the window must cut the sequence"
    rope = b.hf.config.rope_parameters if b.shape.family != "gpt2" else {}
    if rope.get("rope_type") == "dynamic":
        assert len(b.ids) > b.hf.config.max_position_embeddings, "dynamic RoPE acts only past the trained length"


# -- 1. logits and attention patterns --------------------------------------------------------------------------
@pytest.mark.parametrize("shape_id", SHAPE_IDS)
def test_logits_and_patterns_match(built, shape_id):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    logits, patterns = ours(hm, b.ids)
    assert max_diff(logits, b.logits) < LOGITS_TOL
    assert len(patterns) == len(b.patterns)
    for i, (mine, theirs) in enumerate(zip(patterns, b.patterns)):
        assert max_diff(mine, theirs) < PATTERN_TOL, f"layer {i}"


# -- 2. greedy generation -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape_id", SHAPE_IDS)
def test_greedy_generation_matches(built, shape_id):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    assert hm.cfg.ban_specials is False, "an imported model may generate any token"
    prompt = b.tok(H.PROMPT).input_ids
    expected = H.hf_greedy(H.load_hf(b.folder), prompt, H.NEW_TOKENS)   # fresh: dynamic RoPE keeps state
    trace = decode(hm, H.PROMPT, DecodeSettings("greedy", max_new_tokens=H.NEW_TOKENS))
    assert trace.prompt_ids == prompt
    assert trace.output_ids == expected
    if b.shape.eos_reachable:
        assert trace.output_ids[-1] == hm.cfg.eos_id == b.hf.generation_config.eos_token_id


@pytest.mark.parametrize("text", ["Hello", "I am a student. I love you."], ids=["crosses", "beyond"])
def test_greedy_generation_past_the_trained_length(built, text):
    """Dynamic NTK RoPE changes its frequencies once the sequence outgrows max_position_embeddings: a prompt
    that crosses it while generating rotates the new keys (and only those) with the new base, as transformers
    does; a prompt already past it starts with the larger base. (transformers' dynamic RoPE keeps state
    between calls: a freshly loaded model is the reference.)"""
    b = built("llama-gqa1-dynamic")
    hm, hf = load_checkpoint(b.folder), H.load_hf(b.folder)
    prompt = b.tok(text).input_ids
    assert len(prompt) + H.NEW_TOKENS > hf.config.max_position_embeddings
    trace = decode(hm, text, DecodeSettings("greedy", max_new_tokens=H.NEW_TOKENS))
    assert trace.prompt_ids == prompt
    assert trace.output_ids == H.hf_greedy(hf, prompt, H.NEW_TOKENS)


@pytest.mark.parametrize("shape_id", SHAPE_IDS)
def test_capture_api_matches(built, shape_id):
    """What the app runs: HookedModel.run on text generates greedily, then teacher-forces prompt + output; its
    logits and patterns are transformers' on those ids."""
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    r = hm.run(H.PROMPT, max_new_tokens=6)
    prompt = b.tok(H.PROMPT).input_ids
    assert r.tgt_ids[:len(prompt)] == prompt
    hf = H.load_hf(b.folder)
    assert r.output_ids == [i for i in H.hf_greedy(hf, prompt, 6) if i != hf.generation_config.eos_token_id]
    logits, patterns = H.hf_forward(H.load_hf(b.folder), r.tgt_ids)     # fresh: dynamic RoPE keeps state
    assert max_diff(r.logits, logits) < LOGITS_TOL
    for i, theirs in enumerate(patterns):
        assert max_diff(r.cache[f"decoder.{i}.self_attn.hook_pattern"][0], theirs) < PATTERN_TOL


@pytest.mark.parametrize("shape_id", SHAPE_IDS)
def test_beam_search_matches(built, shape_id):
    """Our beam search follows transformers' rules (here early_stopping=True: it stops once `width` hypotheses
    have ended; tests/test_hf_marian_beam.py covers False and "never"), and normalises by the generated length."""
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    for text in (H.PROMPT, "Hello"):
        prompt = b.tok(text).input_ids
        x = torch.tensor([prompt])
        with torch.no_grad():
            out = H.load_hf(b.folder).generate(x, attention_mask=torch.ones_like(x), do_sample=False, num_beams=3,
                                               early_stopping=True, length_penalty=1.0, max_new_tokens=8)
        expected = out[0, len(prompt):].tolist()
        eos = b.hf.generation_config.eos_token_id
        expected = expected[:expected.index(eos) + 1] if eos in expected else expected
        trace = decode(hm, text, DecodeSettings("beam", max_new_tokens=8, beam_width=3, length_penalty=1.0,
                                                early_stopping=True))
        if trace.output_ids != expected:       # only a tie may differ: both ends score the same under our model
            ours, theirs = (_beam_score(hm, prompt, ids) for ids in (trace.output_ids, expected))
            assert abs(ours - theirs) < 1e-4, (repr(text), trace.output_ids, expected, ours, theirs)


def _beam_score(hm, prompt, ids) -> float:
    """Sum of log-probabilities of ids after the prompt (our model, teacher-forced) ÷ their number, as beam search
    ranks finished hypotheses with length_penalty 1."""
    with torch.no_grad():
        logits = hm.model(torch.tensor([list(prompt) + list(ids)]))[0]
    logp = torch.log_softmax(logits[len(prompt) - 1:-1], -1)
    return float(logp.gather(-1, torch.tensor(ids)[:, None]).sum()) / max(1, len(ids))


# -- 3. the tokenizer ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape_id", ONE_PER_TOKENIZER)
def test_tokenizer_matches(built, shape_id):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    for text in H.TOKENIZER_TEXTS + [H.PROMPT, b.shape.logits_text]:
        assert hm.tokenizer.encode(text) == b.tok(text).input_ids, repr(text)


@pytest.mark.parametrize("shape_id", ONE_PER_TOKENIZER)
def test_tokenizer_decodes_as_hf(built, shape_id):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    for text in H.TOKENIZER_TEXTS:
        ids = b.tok(text).input_ids
        assert hm.tokenizer.decode(ids) == b.tok.decode(ids, skip_special_tokens=True), repr(text)


def test_ids_past_the_tokenizer(built):
    """Qwen's embedding matrix has more rows than its tokenizer has tokens: such an id shows and decodes
    without an error (decoding drops it, as transformers' tokenizer does)."""
    b = built("qwen2-3heads-gqa1-bias")
    hm = load_checkpoint(b.folder)
    assert hm.cfg.vocab_size > len(b.tok)
    ids = b.tok("I love you.").input_ids + [hm.cfg.vocab_size - 1]
    assert hm.tokenizer.decode(ids) == b.tok.decode(ids, skip_special_tokens=True)
    assert all(isinstance(p, str) and p for p in hm.tokenizer.pieces(ids))


# -- 4. every family feature is needed: removing it breaks parity --------------------------------------------
def _attn(hm):
    return [blk.self_attn for blk in hm.model.decoder]


def _configs(hm):
    return {id(c): c for c in [hm.model.cfg] + [a.rope for a in _attn(hm) if a.rope is not None]}.values()


def _set_cfg(hm, **kw):
    """Change the model's config and the RoPE config each attention block holds (the same object or not)."""
    for cfg in _configs(hm):
        for k, v in kw.items():
            setattr(cfg, k, v(getattr(cfg, k)) if callable(v) else v)


def _zero_biases(hm, names):
    for a in _attn(hm):
        for n in names:
            lin = getattr(a, n)
            assert lin.bias is not None, f"{n} has no bias: the loader dropped it"
            lin.bias.data.zero_()


def _swap_query_heads(hm):
    """Query head 0 reads the key/value head of query head n_heads − 1 and vice versa: a wrong
    grouped-query mapping (e.g. kv heads interleaved instead of repeated)."""
    for a in _attn(hm):
        d, last = a.d_head, a.n_heads - 1
        assert a.n_kv_heads > 1 and a.n_heads // a.n_kv_heads > 0
        rows = torch.arange(a.n_heads * d)
        rows[:d], rows[last * d:] = torch.arange(last * d, (last + 1) * d), torch.arange(d)
        a.W_Q.weight.data = a.W_Q.weight.data[rows]
        if a.W_Q.bias is not None:
            a.W_Q.bias.data = a.W_Q.bias.data[rows]
        a.W_O.weight.data = a.W_O.weight.data[:, rows]


def _drop_qk_norm(hm):
    for a in _attn(hm):
        assert hasattr(a, "q_norm") and hasattr(a, "k_norm"), "the loader dropped the q/k norm"
        del a.q_norm, a.k_norm


def _swap_gelu(hm):
    for blk in hm.model.decoder:
        act = blk.ff.act
        assert isinstance(act, nn.GELU)
        blk.ff.act = nn.GELU(approximate="none" if act.approximate == "tanh" else "tanh")


def _swap_gate(hm):
    for blk in hm.model.decoder:
        assert hasattr(blk.ff, "W_gate"), "the loader built no gated feed-forward"
        blk.ff.W_gate, blk.ff.W_in = blk.ff.W_in, blk.ff.W_gate


def _tie(hm):
    assert hm.model.lm_head.weight is not hm.model.embed.W_E.weight, "the loader tied untied embeddings"
    hm.model.lm_head.weight = hm.model.embed.W_E.weight


def _scale_scores(factor):
    def hook(x, hook):
        return x * factor
    return lambda hm: {"fwd_hooks": [(f"decoder.{i}.self_attn.hook_scores", hook) for i in range(len(hm.model.decoder))]}


PERTURB = {   # feature -> fn(hm) that breaks it in place (or returns run_with_hooks' keywords)
    "positions": lambda hm: hm.model.embed.pos.weight.data.zero_(),                 # GPT-2's learned table
    "gelu_variant": _swap_gelu,                                                      # gelu_new vs exact gelu
    "attention_scale": _scale_scores(1.25),                                          # 1/√d_head, not 1/√d_model
    "biases": lambda hm: (_zero_biases(hm, ["W_Q", "W_K", "W_V", "W_O"]),
                          [blk.ff.W_in.bias.data.zero_() for blk in hm.model.decoder]),
    "untied": _tie,
    "rope_off": lambda hm: [setattr(a, "rope", None) for a in _attn(hm)],
    "rope_theta": lambda hm: _set_cfg(hm, rope_theta=lambda t: t * 3),
    "rope_type": lambda hm: _set_cfg(hm, rope_type="default"),
    "gated": _swap_gate,
    "embed_scale": lambda hm: setattr(hm.model.embed, "scale", math.sqrt(hm.model.cfg.d_model)),
    "kv_groups": _swap_query_heads,
    "qkv_bias": lambda hm: _zero_biases(hm, ["W_Q", "W_K", "W_V"]),
    "out_bias": lambda hm: _zero_biases(hm, ["W_O"]),
    "qk_norm": _drop_qk_norm,
    "sliding_window": lambda hm: _set_cfg(hm, sliding_window=0),
}
PERTURBATIONS = [(s.id, f) for s in H.SHAPES for f in s.features]


@pytest.mark.parametrize("shape_id,feature", PERTURBATIONS, ids=[f"{s}-{f}" for s, f in PERTURBATIONS])
def test_dropping_a_feature_breaks_parity(built, shape_id, feature):
    b = built(shape_id)
    hm = load_checkpoint(b.folder)
    assert max_diff(our_logits(hm, b.ids), b.logits) < LOGITS_TOL, "no parity to break (see the parity test)"
    kw = PERTURB[feature](hm)
    kw = kw if isinstance(kw, dict) else {}
    assert max_diff(our_logits(hm, b.ids, **kw), b.logits) > BROKEN, f"removing {feature} made no difference"


# -- 5. safety and the checkpoint formats ------------------------------------------------------------------------
@pytest.fixture
def no_unpickling(monkeypatch):
    """torch.load and pickle raise: nothing in a Hugging Face folder is ever unpickled."""
    def refuse(*a, **k):
        raise AssertionError("unpickled something")
    for mod, name in ((torch, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")):
        monkeypatch.setattr(mod, name, refuse)


def _copy(built, shape_id, dest: Path) -> Path:
    shutil.copytree(built(shape_id).folder, dest)
    return dest


def _edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    path.write_text(json.dumps(cfg))


def _refusal(folder: Path) -> str:
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(folder)
    msg = str(e.value)
    assert "\n" not in msg.strip(), f"not one line: {msg!r}"
    return msg.replace(str(folder.parent), "<tmp>")      # the test's own folder name says nothing


@pytest.mark.parametrize("names", [("pytorch_model.bin",),
                                   ("pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin")],
                         ids=["single", "sharded"])
def test_pickled_weights_are_refused(built, tmp_path, names, no_unpickling):
    folder = _copy(built, "llama-3heads-tied", tmp_path / "m")
    (folder / "model.safetensors").unlink()
    for name in names:
        torch.save({}, folder / name)         # a real pickle: never to be opened
    if len(names) > 1:
        (folder / "pytorch_model.bin.index.json").write_text(json.dumps(
            {"metadata": {}, "weight_map": {"model.embed_tokens.weight": names[0], "lm_head.weight": names[1]}}))
    msg = _refusal(folder)
    assert any(n in msg for n in names + ("pytorch_model.bin.index.json",)) and "unpickl" in msg.lower(), msg


def test_safetensors_are_read_beside_a_pickle(built, tmp_path, no_unpickling):
    folder = _copy(built, "qwen2-3heads-gqa1-bias", tmp_path / "m")
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04}q\x00.")
    hm = load_checkpoint(folder)
    assert max_diff(our_logits(hm, built("qwen2-3heads-gqa1-bias").ids), built("qwen2-3heads-gqa1-bias").logits) \
        < LOGITS_TOL


def test_remote_code_is_refused(built, tmp_path, no_unpickling):
    folder = _copy(built, "llama-3heads-tied", tmp_path / "m")
    marker = tmp_path / "ran"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    _edit_config(folder, auto_map={"AutoConfig": "modeling_evil.Cfg", "AutoModelForCausalLM": "modeling_evil.M"})
    msg = _refusal(folder)
    assert "auto_map" in msg or "remote" in msg.lower()
    assert not marker.exists()


def test_unknown_model_type_is_refused(built, tmp_path):
    folder = _copy(built, "llama-3heads-tied", tmp_path / "m")
    _edit_config(folder, model_type="pegasus")
    msg = _refusal(folder)
    assert "'pegasus' is not supported" in msg and all(f in msg for f in SUPPORTED + ("bert", "xlm-roberta", "t5", "mt5",
                                                                                     "bart", "mbart", "m2m_100")), msg


@pytest.mark.parametrize("legacy", [False, True], ids=["rope_parameters", "rope_scaling"])
def test_unsupported_rope_type_is_refused(built, tmp_path, legacy):
    folder = _copy(built, "llama-3heads-tied", tmp_path / "m")
    rope = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
            "original_max_position_embeddings": 16}
    if legacy:
        _edit_config(folder, rope_parameters=None, rope_theta=10000.0, rope_scaling=dict(rope, type="longrope"))
    else:
        _edit_config(folder, rope_parameters=dict(rope, rope_theta=10000.0))
    msg = _refusal(folder)
    assert "longrope" in msg


def test_sharded_checkpoint_loads(built):
    b = built("qwen2-gqa2-tied-sharded")
    shards = sorted(b.folder.glob("model-*.safetensors"))
    assert len(shards) >= 2 and (b.folder / "model.safetensors.index.json").exists()
    hm = load_checkpoint(b.folder)
    assert max_diff(our_logits(hm, b.ids), b.logits) < LOGITS_TOL


def test_a_missing_shard_is_named(built, tmp_path):
    folder = _copy(built, "mistral-window9-gqa2-headdim", tmp_path / "m")
    gone = sorted(folder.glob("model-*.safetensors"))[1]
    gone.unlink()
    assert gone.name in _refusal(folder)


UNUSUAL = {   # configs transformers runs that the loader must either reproduce exactly or refuse
    "qwen2-window-on-all-layers": ("qwen2-gqa2-tied-sharded", dict(use_sliding_window=True, sliding_window=4,
                                                                   max_window_layers=0,
                                                                   layer_types=["sliding_attention"] * 2)),
    "qwen2-window-on-upper-layers": ("qwen2-gqa2-tied-sharded", dict(use_sliding_window=True, sliding_window=4,
                                                                     max_window_layers=1)),
    "llama-yarn-untruncated": ("llama-gqa2-yarn-legacy", dict(rope_scaling=dict(
        type="yarn", factor=4.0, original_max_position_embeddings=16, truncate=False))),
    "llama-yarn-mscale": ("llama-gqa2-yarn-legacy", dict(rope_scaling=dict(
        type="yarn", factor=4.0, original_max_position_embeddings=16, mscale=0.707, mscale_all_dim=0.707))),
    "llama-yarn-attention-factor": ("llama-gqa2-yarn-legacy", dict(rope_scaling=dict(
        type="yarn", factor=4.0, original_max_position_embeddings=16, attention_factor=1.5))),
    "llama-llama3-no-original-max": ("llama-gqa2-llama3-bias", dict(rope_parameters=dict(
        rope_type="llama3", rope_theta=10000.0, factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0))),
    "llama-rms-eps": ("llama-3heads-tied", dict(rms_norm_eps=0.5)),
    "gpt2-ln-eps": ("gpt2-3heads-tied", dict(layer_norm_epsilon=0.5)),
    "gpt2-scale-by-layer": ("gpt2-3heads-tied", dict(scale_attn_by_inverse_layer_idx=True)),
    "gpt2-unscaled": ("gpt2-3heads-tied", dict(scale_attn_weights=False)),
    "llama-gelu-gate": ("llama-3heads-tied", dict(hidden_act="gelu")),
}


@pytest.mark.parametrize("case", list(UNUSUAL))
def test_unusual_config_is_exact_or_refused(built, tmp_path, case):
    shape_id, changes = UNUSUAL[case]
    folder = _copy(built, shape_id, tmp_path / "m")
    if changes.get("max_window_layers") == 1:
        changes = dict(changes, layer_types=["full_attention", "sliding_attention"])
    _edit_config(folder, **changes)
    hf = H.load_hf(folder)
    ids = built(shape_id).ids
    logits, patterns = H.hf_forward(hf, ids)
    assert max_diff(logits, built(shape_id).logits) > BROKEN, f"{case} changes nothing in transformers"
    try:
        hm = load_checkpoint(folder)
    except CheckpointError as e:
        assert "\n" not in str(e).strip()
        return
    assert max_diff(our_logits(hm, ids), logits) < LOGITS_TOL, f"{case}: loaded, but computes something else"
    for mine, theirs in zip(ours(hm, ids)[1], patterns):
        assert max_diff(mine, theirs) < PATTERN_TOL


# -- 6. files as they come from the Hub -------------------------------------------------------------------------
def _tokenizer_files(src: Path, dest: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(src / name, dest / name)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_half_precision_weights(built, tmp_path, dtype):
    """Most published models are stored in bfloat16: read and computed in float32, as transformers does when
    asked for float32."""
    b = built("qwen3-headdim24-gqa2-tied")
    folder = tmp_path / "m"
    H.load_hf(b.folder).to(dtype).save_pretrained(folder)
    _tokenizer_files(b.folder, folder)
    hf = H.load_hf(folder)
    assert next(hf.parameters()).dtype == torch.float32
    logits, patterns = H.hf_forward(hf, b.ids)
    hm = load_checkpoint(folder)
    mine, my_patterns = ours(hm, b.ids)
    assert max_diff(mine, logits) < LOGITS_TOL
    assert all(max_diff(m, t) < PATTERN_TOL for m, t in zip(my_patterns, patterns))


@pytest.mark.parametrize("mask_dtype", [torch.float32, torch.uint8, torch.bool], ids=["f32", "u8", "bool"])
def test_gpt2_original_layout(built, tmp_path, mask_dtype):
    """The original gpt2 files: no "transformer." prefix, and each layer's causal-mask buffer (attn.bias,
    attn.masked_bias) stored with the weights (as float, or as the uint8 / bool older transformers saved)."""
    from safetensors.torch import load_file, save_file
    b = built("gpt2-3heads-tied")
    folder = _copy(built, "gpt2-3heads-tied", tmp_path / "m")
    state = load_file(folder / "model.safetensors")
    n = b.hf.config.n_positions
    state = {k.removeprefix("transformer."): v for k, v in state.items() if k != "lm_head.weight"}
    for i in range(b.hf.config.n_layer):
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).to(mask_dtype).view(1, 1, n, n)
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    hf = H.load_hf(folder)
    logits, _ = H.hf_forward(hf, b.ids)
    assert max_diff(logits, b.logits) < LOGITS_TOL, "transformers reads the layout differently"
    assert max_diff(our_logits(load_checkpoint(folder), b.ids), b.logits) < LOGITS_TOL


def _hub_cache(src: Path, root: Path) -> Path:
    """src laid out as a Hugging Face cache entry: models--org--name/snapshots/<rev>/<file> are relative links
    into models--org--name/blobs/."""
    entry = root / "models--org--tiny"
    snap = entry / "snapshots" / ("0" * 40)
    (entry / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for i, f in enumerate(sorted(src.iterdir())):
        blob = entry / "blobs" / f"{i:064x}"
        shutil.copy(f, blob)
        (snap / f.name).symlink_to(Path("../..") / "blobs" / blob.name)
    return snap


def test_hub_cache_snapshot_loads(built, tmp_path):
    b = built("qwen2-gqa2-tied-sharded")
    snap = _hub_cache(b.folder, tmp_path)
    assert (snap / "model.safetensors.index.json").is_symlink()
    assert max_diff(our_logits(load_checkpoint(snap), b.ids), b.logits) < LOGITS_TOL


def test_a_link_out_of_the_folder_is_refused(built, tmp_path):
    folder = _copy(built, "llama-3heads-tied", tmp_path / "m")
    outside = tmp_path / "elsewhere.safetensors"
    (folder / "model.safetensors").rename(outside)
    (folder / "model.safetensors").symlink_to(outside)
    assert "model.safetensors" in _refusal(folder)


# -- 7. generation settings ---------------------------------------------------------------------------------------
def _with_generation_config(built, shape_id, tmp_path, **changes) -> Path:
    folder = _copy(built, shape_id, tmp_path / "m")
    gen = json.loads((folder / "generation_config.json").read_text())
    gen.update(changes)
    (folder / "generation_config.json").write_text(json.dumps(gen))
    return folder


def test_every_eos_of_the_generation_config_stops(built, tmp_path):
    """Chat models list several end tokens (Llama 3: <|end_of_text|>, <|eot_id|>; Qwen2.5: <|im_end|>,
    <|endoftext|>): transformers stops at any of them, so must we."""
    b = built("llama-3heads-tied")
    eot, eos = b.tok.convert_tokens_to_ids("<|eot_id|>"), b.hf.generation_config.eos_token_id
    folder = _with_generation_config(built, "llama-3heads-tied", tmp_path, eos_token_id=[eot, eos])  # emits the 2nd
    prompt = b.tok(H.PROMPT).input_ids
    expected = H.hf_greedy(H.load_hf(folder), prompt, H.NEW_TOKENS)
    assert expected[-1] == eos and len(expected) < H.NEW_TOKENS
    got = decode(load_checkpoint(folder), H.PROMPT, DecodeSettings("greedy", max_new_tokens=H.NEW_TOKENS)).output_ids
    assert got == expected            # every eos of the list stops (ModelConfig.stop_ids)


def test_repetition_penalty_of_the_generation_config(built, tmp_path):
    """Qwen2.5's instruct models ship repetition_penalty 1.05 in generation_config.json, which transformers
    applies to greedy decoding too."""
    b = built("qwen2-gqa2-tied-sharded")
    folder = _with_generation_config(built, "qwen2-gqa2-tied-sharded", tmp_path, repetition_penalty=1.3)
    prompt = b.tok(H.PROMPT).input_ids
    expected = H.hf_greedy(H.load_hf(folder), prompt, H.NEW_TOKENS)
    assert expected != H.hf_greedy(b.hf, prompt, H.NEW_TOKENS), "the penalty changes nothing here"
    got = decode(load_checkpoint(folder), H.PROMPT, DecodeSettings("greedy", max_new_tokens=H.NEW_TOKENS)).output_ids
    assert got == expected            # ModelConfig.repetition_penalty, applied as transformers does
