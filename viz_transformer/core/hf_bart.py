"""The translation families' Hugging Face folders (bart, mbart, m2m_100: M2M100 and NLLB) as our encoder-decoder
config, and their tensor names mapped to ours.

BART: post-norm blocks (as Marian's), learned positions read from row 2 on (BartLearnedPositionalEmbedding's
offset), a LayerNorm over token + position embeddings (layernorm_embedding), a fixed logits bias, and <s> forced
after the decoder's start token when the config says forced_bos_token_id. mBART: the same embeddings, pre-norm
blocks and a final LayerNorm on each stack. M2M100 / NLLB: pre-norm with final LayerNorms, no embedding norm and no
logits bias, fairseq's sinusoidal table from row pad_id + 1 on, embeddings × √d_model (scale_embedding). All three
share one embedding between encoder, decoder and output. Language codes are the tokenizer's (core.hf_languages).
"""
from __future__ import annotations

from typing import Callable

import torch

from viz_transformer.core.checkpoint_files import CheckpointError
from viz_transformer.core.config import LIMITS, ModelConfig

FAMILIES = ("bart", "mbart", "m2m_100")
ACTS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_new", "silu": "silu", "swish": "silu"}
LEARNED_OFFSET = 2            # BART's and mBART's learned tables start at row 2 (fairseq's padding rows)
Rule = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


def _same(t):
    return t


def bart_config(raw: dict, gen: dict, common: dict) -> ModelConfig:
    """Our ModelConfig for a bart, mbart or m2m_100 config.json; CheckpointError in one line for what is not
    supported (different encoder and decoder widths, an untied output, a LayerNorm-free BART variant)."""
    family = raw["model_type"]
    heads = {int(raw.get(k, 16)) for k in ("encoder_attention_heads", "decoder_attention_heads")}
    ffn = {int(raw.get(k, 4096)) for k in ("encoder_ffn_dim", "decoder_ffn_dim")}
    if len(heads) != 1 or len(ffn) != 1:
        raise CheckpointError(f"{family} with different encoder and decoder head counts or FFN widths is not supported")
    if not raw.get("tie_word_embeddings", True):
        raise CheckpointError(f"{family} with an output matrix apart from the embeddings is not supported")
    act = raw.get("activation_function", "gelu")
    if act not in ACTS:
        raise CheckpointError(f"{family} activation {act!r} is not supported")
    for flag in ("add_bias_logits", "add_final_layer_norm", "normalize_before"):   # old fairseq-converted BART
        if family == "bart" and raw.get(flag):
            raise CheckpointError(f"bart with {flag}=true (an mBART-style variant saved as bart) is not supported")
    pad = int(common["pad_id"]) if common["pad_id"] >= 0 else 1
    start = int(_first(gen, raw, "decoder_start_token_id", common["eos_id"]))
    forced = _first(gen, raw, "forced_bos_token_id", None)
    m2m = family == "m2m_100"
    return ModelConfig(**{**common, **dict(
        architecture="encoder_decoder", n_encoder_layers=int(raw["encoder_layers"]),
        n_decoder_layers=int(raw["decoder_layers"]), d_model=int(raw["d_model"]), n_heads=heads.pop(),
        d_ff=ffn.pop(), activation=ACTS[act], norm="post" if family == "bart" else "pre",
        positional="sinusoidal_fairseq" if m2m else "learned", pos_offset=pad + 1 if m2m else LEARNED_OFFSET,
        embed_norm=not m2m, logits_bias=not m2m, tie_embeddings=True, pad_id=pad, bos_id=start,
        forced_bos_id=-1 if forced is None else int(forced),
        max_len=min(int(raw.get("max_position_embeddings", 1024)), LIMITS["max_len"]),
        scale_embeddings=bool(raw.get("scale_embedding", m2m)))})


def _first(gen: dict, raw: dict, key: str, default):
    """generation_config.json's value, else config.json's, else default."""
    for d in (gen, raw):
        if d.get(key) is not None:
            return d[key]
    return default


def bart_rules(cfg: ModelConfig, names: set[str]) -> dict[str, list[Rule]]:
    """HF name -> [(our name, transform)]: model.shared is the encoder's, the decoder's and the output's matrix;
    each stack's embed_positions (learned) and layernorm_embedding go to its own Embed, its layer_norm (pre-norm)
    to encoder_norm / decoder_norm; the layers are named as Marian's."""
    embed = next((n for n in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                              "model.decoder.embed_tokens.weight", "lm_head.weight") if n in names), "model.shared.weight")
    rules: dict[str, list[Rule]] = {embed: [("src_embed.W_E.weight", _same)]}
    if cfg.logits_bias:
        rules["final_logits_bias"] = [("logits_bias", lambda t: t.reshape(-1))]
    attn = {"q_proj": "W_Q", "k_proj": "W_K", "v_proj": "W_V", "out_proj": "W_O"}
    subs = {"self_attn_layer_norm": "ln1", "encoder_attn_layer_norm": "ln_cross", "final_layer_norm": "ln2",
            "fc1": "ff.W_in", "fc2": "ff.W_out"}
    for part, n, ours in (("encoder", cfg.n_encoder_layers, "src_embed"), ("decoder", cfg.n_decoder_layers, "tgt_embed")):
        top = f"model.{part}."
        if cfg.positional == "learned":
            rules[top + "embed_positions.weight"] = [(f"{ours}.pos.weight", _same)]
        for p in ("weight", "bias"):
            if cfg.embed_norm:
                rules[f"{top}layernorm_embedding.{p}"] = [(f"{ours}.norm.{p}", _same)]
            if cfg.norm == "pre":
                rules[f"{top}layer_norm.{p}"] = [(f"{part}_norm.{p}", _same)]
        for i in range(n):
            h, o = f"{top}layers.{i}.", f"{part}.{i}."
            blocks = {"self_attn": "self_attn"} | ({"encoder_attn": "cross_attn"} if part == "decoder" else {})
            for theirs, mine in blocks.items():
                for a, b in attn.items():
                    for p in ("weight", "bias"):
                        rules[f"{h}{theirs}.{a}.{p}"] = [(f"{o}{mine}.{b}.{p}", _same)]
            for theirs, mine in subs.items():
                for p in ("weight", "bias"):
                    rules[f"{h}{theirs}.{p}"] = [(f"{o}{mine}.{p}", _same)]
    return rules


def bart_ignored(name: str) -> bool:
    """The tied copies of the shared embedding, and M2M100's sinusoidal table (ours is computed: same numbers)."""
    return name in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                    "lm_head.weight") or name.endswith("embed_positions.weights")
