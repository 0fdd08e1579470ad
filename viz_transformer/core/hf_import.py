"""A local Hugging Face model folder opened as our own Transformer, with no conversion step.

    hm = load_checkpoint("models/Qwen2.5-0.5B")      # config.json + *.safetensors + tokenizer.json

Families: marian (the opus-mt translators: encoder-decoder, post-norm, sinusoidal positions with the sines
first, a logits bias; SentencePiece source.spm + vocab.json, or separate vocabularies: source.spm + vocab.json
for the source, target.spm + target_vocab.json for the target), gpt2 (learned positions, pre-norm LayerNorm, Conv1D weights, gelu_new, tied embeddings) and the
Llama family: llama, qwen2 (q/k/v biases), qwen3 (q/k norms, an explicit head_dim), mistral (a sliding
window) with RMSNorm, the gated FFN (SwiGLU), grouped-query attention and RoPE (rope_parameters, or the
older rope_theta / rope_scaling; types default, linear, dynamic, yarn, llama3); the BERT family (core.hf_bert)
and T5 / mT5 (core.hf_t5: a relative position bias, unscaled scores); the translation families bart, mbart and
m2m_100 (M2M100 and NLLB: core.hf_bart; their language codes: core.hf_languages).

Safe by construction, as our own checkpoints: weights only from safetensors (a pickle such as
pytorch_model.bin is refused, never unpickled); a config that needs remote code is refused; every file,
links included (a Hugging Face cache's snapshot links into blobs/), must resolve inside the model's
folder (or, for a cache snapshot, its models--… folder); names, dtypes and shapes of every tensor are
compared with the model the config describes (built on the meta device) and the size is capped before
any tensor is read.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import torch
from safetensors import safe_open

from viz_transformer.core import checkpoint as ck
from viz_transformer.core.config import LIMITS, ModelConfig, early_stopping_rule
from viz_transformer.core.hf_bart import FAMILIES as BART_FAMILIES, bart_config, bart_ignored, bart_rules
from viz_transformer.core.hf_bert import FAMILIES as BERT_FAMILIES, bert_config, bert_rules
from viz_transformer.core.hf_rope import max_len as _max_len, rope_fields as _rope
from viz_transformer.core.hf_t5 import FAMILIES as T5_FAMILIES, t5_config, t5_ignored, t5_rules

FAMILIES = ("marian", "gpt2", "llama", "qwen2", "qwen3", "mistral") + BERT_FAMILIES + T5_FAMILIES + BART_FAMILIES
INDEX = "model.safetensors.index.json"
HEADER_DTYPES = {**ck.DTYPES, "U8": 1, "BOOL": 1, "I64": 8}  # integer/bool tensors: only buffers we skip (GPT-2's
                                                               # mask, BERT's position_ids)
PICKLES = ("pytorch_model.bin", "model.bin", "model.pt", "model.pth")


def is_hf_folder(folder) -> bool:
    """A folder with a config.json that names a model_type (ours names an architecture instead)."""
    path = Path(folder) / "config.json"
    try:
        return path.is_file() and "model_type" in json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def link_base(folder: Path) -> Path:
    """Where the folder's files may point: the folder, or a cache snapshot's models--… folder (blobs/)."""
    folder = folder.resolve() if not folder.is_symlink() else folder.absolute()
    return folder.parent.parent.resolve() if folder.parent.name == "snapshots" else folder.resolve()


def folder_file(folder: Path, name: str) -> Path:
    """folder/name, refused when it is a link resolving outside the folder's base."""
    p = folder / name
    if not ck.inside(p, link_base(folder)):
        raise ck.CheckpointError(f"{p} is a link to {p.resolve()}, outside {link_base(folder)}: refused")
    return p


def _get(raw: dict, *names, default=None):
    for n in names:
        if raw.get(n) is not None:
            return raw[n]
    return default


def _eos_list(raw: dict, gen: dict) -> list[int]:
    eos = _get(gen, "eos_token_id", default=_get(raw, "eos_token_id", default=-1))
    return [int(i) for i in (eos if isinstance(eos, list) else [eos])] or [-1]


def _eos(raw: dict, gen: dict) -> int:
    return _eos_list(raw, gen)[0]


def _forced_id(forced, eos: int) -> int:
    """forced_eos_token_id as our forced_eos_id: -1 when it is the end id (or absent), else the id itself (a folder
    whose forced token is not its eos_token_id: transformers forces it at the length limit all the same)."""
    if forced is None:
        return -1
    forced = int(forced[0] if isinstance(forced, list) else forced)
    return -1 if forced == eos else forced


def hf_config(raw: dict, gen: Optional[dict] = None, names=None) -> ModelConfig:
    """Our ModelConfig for a Hugging Face config.json (and generation_config.json): CheckpointError, in one
    line, for what is not supported. names: the weights' tensor names (a BERT-family head is read from them)."""
    gen = gen or {}
    family = raw.get("model_type")
    if raw.get("auto_map") or raw.get("trust_remote_code"):
        raise ck.CheckpointError("this config needs remote code (auto_map): refused, nothing from it is run")
    if family not in FAMILIES:
        raise ck.CheckpointError(f"model_type {family!r} is not supported; supported: {', '.join(FAMILIES)}")
    pad = _get(gen, "pad_token_id", default=_get(raw, "pad_token_id", default=-1))
    forced = _get(gen, "forced_eos_token_id", default=_get(raw, "forced_eos_token_id", default=None))
    common = dict(architecture="decoder_only", n_encoder_layers=0, dropout=0.0, norm="pre", prepend_bos=False,
                  forced_eos=forced is not None, forced_eos_id=_forced_id(forced, _eos(raw, gen)),
                  ban_specials=False, sep_id=-1, pad_id=int(pad if not isinstance(pad, list) else pad[0]),
                  bos_id=int(_get(raw, "bos_token_id", default=-1)), eos_id=_eos(raw, gen),
                  stop_ids=tuple(dict.fromkeys(i for i in _eos_list(raw, gen)[1:] if i >= 0)),
                  repetition_penalty=float(gen.get("repetition_penalty") or 1.0),
                  num_beams=int(gen.get("num_beams") or 4), length_penalty=float(gen.get("length_penalty", 1.0)),
                  early_stopping=early_stopping_rule(gen.get("early_stopping", False)),     # transformers' default
                  max_new_tokens=int(gen.get("max_new_tokens") or 0), max_length=int(gen.get("max_length") or 0),
                  vocab_size=int(raw["vocab_size"]))
    if family == "marian":
        return _marian_config(raw, gen, common)
    if family in BERT_FAMILIES:
        return bert_config(raw, common, names)
    if family in T5_FAMILIES:
        return t5_config(raw, gen, common, names)
    if family in BART_FAMILIES:
        return bart_config(raw, gen, common)
    if family == "gpt2":
        for flag, ok in (("scale_attn_by_inverse_layer_idx", False), ("reorder_and_upcast_attn", False),
                         ("scale_attn_weights", True), ("add_cross_attention", False)):
            if raw.get(flag, ok) != ok:
                raise ck.CheckpointError(f"GPT-2 with {flag}={raw[flag]!r} is not supported")
        act = raw.get("activation_function", "gelu_new")
        acts = {"gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}
        if act not in acts:
            raise ck.CheckpointError(f"GPT-2 activation {act!r} is not supported")
        d = int(raw.get("n_embd", 768))
        return ModelConfig(**common, d_model=d, n_heads=int(raw.get("n_head", 12)),
                           n_decoder_layers=int(raw.get("n_layer", 12)), d_ff=int(raw.get("n_inner") or 4 * d),
                           activation=acts[act], max_len=int(raw.get("n_positions", 1024)), positional="learned",
                           norm_eps=float(raw.get("layer_norm_epsilon", 1e-5)), scale_embeddings=False,
                           tie_embeddings=bool(raw.get("tie_word_embeddings", True)))
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise ck.CheckpointError(f"{family} with hidden_act {act!r} is not supported (silu only)")
    d, heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
    window = 0
    if family == "mistral":
        window = int(raw.get("sliding_window") or 0)
    elif family in ("qwen2", "qwen3") and raw.get("use_sliding_window"):
        kinds = set(raw.get("layer_types") or [])
        if kinds != {"sliding_attention"}:
            raise ck.CheckpointError(f"{family} with sliding windows on some layers only is not supported")
        window = int(raw.get("sliding_window") or 0)
    bias = bool(raw.get("attention_bias", False))
    return ModelConfig(**common, d_model=d, n_heads=heads, n_kv_heads=int(raw.get("num_key_value_heads") or heads),
                       head_dim=int(raw.get("head_dim") or d // heads),
                       n_decoder_layers=int(raw["num_hidden_layers"]), d_ff=int(raw["intermediate_size"]),
                       activation="silu", ffn="gated", norm_type="rms", norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
                       positional="rope", max_len=_max_len(raw),
                       scale_embeddings=False, tie_embeddings=bool(raw.get("tie_word_embeddings", False)),
                       qkv_bias=True if family == "qwen2" else bias, out_bias=False if family == "qwen2" else bias,
                       ffn_bias=bool(raw.get("mlp_bias", False)), qk_norm=family == "qwen3", sliding_window=window,
                       **_rope(raw, family))


ACTS = {"swish": "silu", "silu": "silu", "gelu": "gelu", "gelu_new": "gelu_new", "relu": "relu"}


def _marian_config(raw: dict, gen: dict, common: dict) -> ModelConfig:
    """Marian (the opus-mt translators): encoder-decoder, post-norm, embeddings × √d, sinusoidal positions
    with the sines first, a fixed logits bias, decoding started from decoder_start_token_id (the pad id)."""
    enc, dec = (int(raw.get(k, 16)) for k in ("encoder_attention_heads", "decoder_attention_heads"))
    ffn = {int(raw.get(k, 4096)) for k in ("encoder_ffn_dim", "decoder_ffn_dim")}
    if enc != dec or len(ffn) != 1:
        raise ck.CheckpointError("Marian with different encoder and decoder head counts or FFN widths is not supported")
    shared = raw.get("share_encoder_decoder_embeddings", True)
    target = int(raw.get("decoder_vocab_size") or raw["vocab_size"])
    if shared and target != raw["vocab_size"]:
        raise ck.CheckpointError(f"Marian with shared embeddings but decoder_vocab_size {target} ≠ vocab_size "
                                 f"{raw['vocab_size']}: the config contradicts itself")
    if not raw.get("tie_word_embeddings", True):
        raise ck.CheckpointError("Marian with an output matrix apart from the embeddings is not supported")
    act = raw.get("activation_function", "gelu")
    if act not in ACTS:
        raise ck.CheckpointError(f"Marian activation {act!r} is not supported")
    start = int(_get(gen, "decoder_start_token_id", default=_get(raw, "decoder_start_token_id", default=common["pad_id"])))
    return ModelConfig(**{**common, **dict(
        architecture="encoder_decoder", bos_id=start, n_encoder_layers=int(raw["encoder_layers"]),
        tgt_vocab_size=0 if shared else target,             # its own target vocabulary: its own embedding
        d_model=int(raw["d_model"]), n_heads=enc, n_decoder_layers=int(raw["decoder_layers"]), d_ff=ffn.pop(),
        activation=ACTS[act], norm="post", positional="sinusoidal_halves", logits_bias=True, tie_embeddings=True,
        max_len=min(int(raw.get("max_position_embeddings", 512)), LIMITS["max_len"]),
        scale_embeddings=bool(raw.get("scale_embedding", False)))})


# -- weights: Hugging Face names -> ours --------------------------------------------------------------
Rule = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


def _same(t):
    return t


def _t(t):
    return t.t()


def _gpt2_rules(cfg: ModelConfig, names: set[str]) -> dict[str, list[Rule]]:
    """HF name -> [(our name, transform)]: Conv1D weights are [in, out] (transposed); c_attn holds q, k, v."""
    pre = "transformer." if any(n.startswith("transformer.") for n in names) else ""
    d = cfg.d_model
    rules: dict[str, list[Rule]] = {f"{pre}wte.weight": [("embed.W_E.weight", _same)],
                                    f"{pre}wpe.weight": [("embed.pos.weight", _same)],
                                    f"{pre}ln_f.weight": [("decoder_norm.weight", _same)],
                                    f"{pre}ln_f.bias": [("decoder_norm.bias", _same)]}
    if not cfg.tie_embeddings:
        rules["lm_head.weight"] = [("lm_head.weight", _same)]
    for i in range(cfg.n_decoder_layers):
        h, o = f"{pre}h.{i}.", f"decoder.{i}."
        rules[h + "attn.c_attn.weight"] = [(o + f"self_attn.W_{x}.weight", lambda t, j=j: t[:, j * d:(j + 1) * d].t())
                                          for j, x in enumerate("QKV")]
        rules[h + "attn.c_attn.bias"] = [(o + f"self_attn.W_{x}.bias", lambda t, j=j: t[j * d:(j + 1) * d])
                                        for j, x in enumerate("QKV")]
        rules[h + "attn.c_proj.weight"] = [(o + "self_attn.W_O.weight", _t)]
        rules[h + "attn.c_proj.bias"] = [(o + "self_attn.W_O.bias", _same)]
        rules[h + "mlp.c_fc.weight"] = [(o + "ff.W_in.weight", _t)]
        rules[h + "mlp.c_fc.bias"] = [(o + "ff.W_in.bias", _same)]
        rules[h + "mlp.c_proj.weight"] = [(o + "ff.W_out.weight", _t)]
        rules[h + "mlp.c_proj.bias"] = [(o + "ff.W_out.bias", _same)]
        for a, b in (("ln_1", "ln1"), ("ln_2", "ln2")):
            for p in ("weight", "bias"):
                rules[f"{h}{a}.{p}"] = [(f"{o}{b}.{p}", _same)]
    return rules


def _gpt2_ignored(name: str) -> bool:
    """Buffers older GPT-2 files carry (the causal mask), which our masks make instead."""
    return name.endswith((".attn.bias", ".attn.masked_bias")) and "c_attn" not in name


def _llama_rules(cfg: ModelConfig, names: set[str]) -> dict[str, list[Rule]]:
    rules: dict[str, list[Rule]] = {"model.embed_tokens.weight": [("embed.W_E.weight", _same)],
                                    "model.norm.weight": [("decoder_norm.weight", _same)]}
    if not cfg.tie_embeddings:
        rules["lm_head.weight"] = [("lm_head.weight", _same)]
    parts = {"self_attn.q_proj": "self_attn.W_Q", "self_attn.k_proj": "self_attn.W_K", "self_attn.v_proj": "self_attn.W_V",
             "self_attn.o_proj": "self_attn.W_O", "self_attn.q_norm": "self_attn.q_norm",
             "self_attn.k_norm": "self_attn.k_norm", "mlp.gate_proj": "ff.W_gate", "mlp.up_proj": "ff.W_in",
             "mlp.down_proj": "ff.W_out", "input_layernorm": "ln1", "post_attention_layernorm": "ln2"}
    for i in range(cfg.n_decoder_layers):
        for theirs, ours in parts.items():
            for p in ("weight", "bias"):
                rules[f"model.layers.{i}.{theirs}.{p}"] = [(f"decoder.{i}.{ours}.{p}", _same)]
    return rules


def _marian_rules(cfg: ModelConfig, names: set[str]) -> dict[str, list[Rule]]:
    rules: dict[str, list[Rule]] = {"final_logits_bias": [("logits_bias", lambda t: t.reshape(-1))]}
    if cfg.tgt_vocab_size:                  # separate vocabularies: each side its own matrix (the output: the target's)
        rules["model.encoder.embed_tokens.weight"] = [("src_embed.W_E.weight", _same)]
        rules["model.decoder.embed_tokens.weight"] = [("tgt_embed.W_E.weight", _same)]
    else:
        embed = next((n for n in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                  "model.decoder.embed_tokens.weight", "lm_head.weight") if n in names),
                     "model.shared.weight")
        rules[embed] = [("src_embed.W_E.weight", _same)]
    attn = {"q_proj": "W_Q", "k_proj": "W_K", "v_proj": "W_V", "out_proj": "W_O"}
    for part, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(n):
            h, o = f"model.{part}.layers.{i}.", f"{part}.{i}."
            blocks = {"self_attn": "self_attn"} | ({"encoder_attn": "cross_attn"} if part == "decoder" else {})
            for theirs, ours in blocks.items():
                for a, b in attn.items():
                    for p in ("weight", "bias"):
                        rules[f"{h}{theirs}.{a}.{p}"] = [(f"{o}{ours}.{b}.{p}", _same)]
            norms = {"self_attn_layer_norm": "ln1", "encoder_attn_layer_norm": "ln_cross", "final_layer_norm": "ln2",
                     "fc1": "ff.W_in", "fc2": "ff.W_out"}
            for theirs, ours in norms.items():
                for p in ("weight", "bias"):
                    rules[f"{h}{theirs}.{p}"] = [(f"{o}{ours}.{p}", _same)]
    return rules


def _marian_ignored(name: str) -> bool:
    """The tied copies of the embedding, and the fixed position tables (ours are computed, same numbers)."""
    return name.endswith("embed_positions.weight") or name in (
        "model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")


def weight_files(folder: Path) -> list[Path]:
    """The folder's safetensors files: the shards its index names, else model.safetensors; a pickled model
    (.bin) is refused by name, never read."""
    if (folder / INDEX).is_file():
        index = ck.read_json(folder, INDEX)
        files = sorted(set((index.get("weight_map") or {}).values()))
        if not files or not all(isinstance(f, str) and "/" not in f and "\\" not in f for f in files):
            raise ck.CheckpointError(f"{folder / INDEX} has no usable weight_map")
        paths = [folder_file(folder, f) for f in files]
        gone = [p.name for p in paths if not p.is_file()]
        if gone:
            raise ck.CheckpointError(f"{folder}: {', '.join(gone)}, listed in {INDEX}, is missing")
        return paths
    if (folder / "model.safetensors").is_file():
        return [folder_file(folder, "model.safetensors")]
    pickled = ([p for p in PICKLES if (folder / p).exists()] + sorted(p.name for p in folder.glob("*.bin"))
               + [p.name for p in folder.glob("pytorch_model.bin.index.json")])   # names its .bin shards
    if pickled:
        raise ck.CheckpointError(f"{folder / pickled[0]} is a pickle (PyTorch's .bin format), which can run code "
                                 "and is never unpickled here: save the model with safetensors "
                                 "(save_pretrained(..., safe_serialization=True))")
    raise ck.CheckpointError(f"{folder} has no model.safetensors (or {INDEX})")


def hf_weights(folder: Path, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The weights as our state dict (float32), checked before anything is allocated (names, dtypes, shapes
    against the meta-device model the config describes; the size against the cap), then read shard by shard,
    mapped and NaN-checked."""
    family = json.loads(folder_file(folder, "config.json").read_text(encoding="utf-8"))["model_type"]
    ck.model_bytes(cfg, folder / "config.json")
    shards = weight_files(folder)
    headers = {}
    for path in shards:
        _, header = ck.safetensors_header(path, dtypes=HEADER_DTYPES)
        for name in header:
            headers[name] = (path, tuple(header[name]["shape"]), header[name]["dtype"])
    names = set(headers)
    make, ignored = {"gpt2": (_gpt2_rules, _gpt2_ignored), "marian": (_marian_rules, _marian_ignored),
                     **{f: bert_rules(f) for f in BERT_FAMILIES}, **{f: (t5_rules, t5_ignored) for f in T5_FAMILIES},
                     **{f: (bart_rules, bart_ignored) for f in BART_FAMILIES}}.get(
        family, (_llama_rules, lambda n: n.endswith("rotary_emb.inv_freq")))
    rules = make(cfg, names)
    ignored_tied = {"lm_head.weight"} if cfg.tie_embeddings else set()
    unexpected = sorted(n for n in names if n not in rules and not ignored(n) and n not in ignored_tied)
    if unexpected:
        raise ck.CheckpointError(f"{folder}: tensors this {family} config does not describe: {', '.join(unexpected[:5])}")
    not_float = sorted(n for n in names if n in rules and headers[n][2] not in ck.DTYPES)
    if not_float:
        n = not_float[0]
        raise ck.CheckpointError(f"{headers[n][0]}: {n} is stored as {headers[n][2]}, not as a float")
    ref = ck.meta_reference(cfg).state_dict(keep_vars=True)
    first: dict = {}                                   # tied tensors: every alias -> the first name
    for k, t in ref.items():
        first.setdefault(id(t), k)
    want = {ours for name in names if name in rules for ours, _ in rules[name]}
    needed = {k for k, t in ref.items() if first[id(t)] == k}
    missing = sorted(needed - want)
    if missing:
        raise ck.CheckpointError(f"{folder}: missing tensors for {', '.join(missing[:5])}")
    state = {}
    for path in shards:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                if name not in rules:
                    continue
                t = f.get_tensor(name).float()
                if not torch.isfinite(t.sum()) and not torch.isfinite(t).all():   # one reduction, no [n] mask
                    raise ck.CheckpointError(f"{path} is corrupt: {name} holds NaN or infinite values")
                for ours, fn in rules[name]:
                    v = fn(t).contiguous()
                    if tuple(v.shape) != tuple(ref[ours].shape):
                        raise ck.CheckpointError(f"{path}: {name} gives {ours} the shape {tuple(v.shape)}, the config "
                                                 f"needs {tuple(ref[ours].shape)}")
                    state[ours] = v
    return state


def read_hf(folder) -> tuple[ModelConfig, dict]:
    """(our config, meta) of a Hugging Face folder: meta names the family and the files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ck.CheckpointError(f"checkpoint folder {folder} does not exist")
    raw = ck.read_json(folder, folder_file(folder, "config.json").name)
    gen = (ck.read_json(folder, "generation_config.json") if folder_file(folder, "generation_config.json").is_file()
           else {})
    names = None
    if raw.get("model_type") in BERT_FAMILIES + T5_FAMILIES and not (raw.get("auto_map") or raw.get("trust_remote_code")):
        names = {n for shard in weight_files(folder)
                 for n in ck.safetensors_header(shard, dtypes=HEADER_DTYPES)[1]}
    try:
        cfg = hf_config(raw, gen, names)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ck.CheckpointError):
            raise
        raise ck.CheckpointError(f"{folder / 'config.json'}: {e}") from None
    task = "mlm" if cfg.head == "mlm" else "encoder" if cfg.is_encoder_only else "lm"
    return cfg, {"task": task, "source": "Hugging Face", "model_type": raw.get("model_type"),
                 "data": "unknown (an imported model)", "generation_config": gen}
