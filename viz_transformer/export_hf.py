"""One of our checkpoints written as a Hugging Face `llama` folder (config.json, model.safetensors,
tokenizer.json, generation_config.json), for a model trained here with the Llama family's parts: RoPE,
RMSNorm, the gated FFN (SwiGLU), grouped-query attention, no biases, no embedding scale, pre-norm.

    python -m viz_transformer export-hf checkpoints/stories-llama out/stories-llama

transformers opens the folder as LlamaForCausalLM with the same logits, and so does `load_checkpoint`.
The SentencePiece model becomes a `tokenizers` Unigram model with byte fallback, as Hugging Face converts
Llama's own tokenizer (▁ for spaces, [begin] added in front by the post-processor).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from viz_transformer.core.checkpoint import unique_state_dict
from viz_transformer.run.capture import HookedModel

NEEDS = {"architecture": "decoder_only", "positional": "rope", "norm_type": "rms", "ffn": "gated", "activation": "silu",
         "norm": "pre", "qkv_bias": False, "out_bias": False, "ffn_bias": False, "scale_embeddings": False,
         "qk_norm": False, "logits_bias": False, "sliding_window": 0, "sep_id": -1}


def llama_config(cfg) -> dict:
    wrong = {k: getattr(cfg, k) for k, v in NEEDS.items() if getattr(cfg, k) != v}
    if wrong:
        raise ValueError(f"only a Llama-style language model can be written as a llama folder; this one has "
                         f"{', '.join(f'{k}={v!r}' for k, v in wrong.items())}")
    rope = {"rope_type": cfg.rope_type, "rope_theta": cfg.rope_theta}
    if cfg.rope_type != "default":
        rope.update(factor=cfg.rope_factor, original_max_position_embeddings=cfg.rope_original_max,
                    low_freq_factor=cfg.rope_low_freq_factor, high_freq_factor=cfg.rope_high_freq_factor,
                    beta_fast=cfg.rope_beta_fast, beta_slow=cfg.rope_beta_slow)
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": cfg.vocab_size,
            "hidden_size": cfg.d_model, "intermediate_size": cfg.d_ff, "num_hidden_layers": cfg.n_decoder_layers,
            "num_attention_heads": cfg.n_heads, "num_key_value_heads": cfg.kv_heads, "head_dim": cfg.d_head,
            "hidden_act": "silu", "max_position_embeddings": cfg.max_len, "rms_norm_eps": cfg.norm_eps,
            "rope_parameters": rope, "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": cfg.tie_embeddings, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id,
            "pad_token_id": cfg.pad_id, "torch_dtype": "float32"}


def llama_weights(model) -> dict[str, torch.Tensor]:
    cfg, ours = model.cfg, unique_state_dict(model)
    out = {"model.embed_tokens.weight": ours["embed.W_E.weight"], "model.norm.weight": ours["decoder_norm.weight"]}
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = ours["lm_head.weight"]
    parts = {"self_attn.W_Q": "self_attn.q_proj", "self_attn.W_K": "self_attn.k_proj", "self_attn.W_V": "self_attn.v_proj",
             "self_attn.W_O": "self_attn.o_proj", "ff.W_gate": "mlp.gate_proj", "ff.W_in": "mlp.up_proj",
             "ff.W_out": "mlp.down_proj", "ln1": "input_layernorm", "ln2": "post_attention_layernorm"}
    for i in range(cfg.n_decoder_layers):
        for mine, theirs in parts.items():
            out[f"model.layers.{i}.{theirs}.weight"] = ours[f"decoder.{i}.{mine}.weight"]
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def tokenizer_json(tok) -> dict:
    """Our SentencePiece model as a tokenizers Unigram model with byte fallback (Llama's conversion)."""
    sp = tok.sp
    vocab = [[sp.id_to_piece(i), float(sp.get_score(i))] for i in range(sp.get_piece_size())]
    specials = [i for i in range(sp.get_piece_size()) if sp.is_control(i) or sp.is_unknown(i)]
    bos = sp.id_to_piece(tok.bos_id)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True} for i in specials],
        "normalizer": {"type": "Sequence", "normalizers": [        # SentencePiece's nmt_nfkc, extra spaces removed
            {"type": "NFKC"}, {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            {"type": "Prepend", "prepend": "\u2581"},
                                                          {"type": "Replace", "pattern": {"String": " "},
                                                           "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {bos: {"id": bos, "ids": [tok.bos_id], "tokens": [bos]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "Unigram", "unk_id": tok.unk_id, "vocab": vocab, "byte_fallback": True},
    }


def write_llama_folder(hm: HookedModel, out) -> Path:
    """The checkpoint as a Hugging Face llama folder at `out` (created)."""
    cfg = hm.cfg
    conf = llama_config(cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(conf, indent=1) + "\n", encoding="utf-8")
    save_file(llama_weights(hm.model), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "tokenizer.json").write_text(json.dumps(tokenizer_json(hm.tokenizer), ensure_ascii=False), encoding="utf-8")
    sp = hm.tokenizer.sp
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": sp.id_to_piece(cfg.bos_id),
        "eos_token": sp.id_to_piece(cfg.eos_id), "unk_token": sp.id_to_piece(hm.tokenizer.unk_id),
        "pad_token": sp.id_to_piece(cfg.pad_id), "model_max_length": cfg.max_len}, indent=1) + "\n", encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id, "pad_token_id": cfg.pad_id,
        "bad_words_ids": [[i] for i in sorted({cfg.pad_id, hm.tokenizer.unk_id, cfg.bos_id}) if i >= 0]},
        indent=1) + "\n", encoding="utf-8")
    return out


def write_hf_folder(hm: HookedModel, out) -> tuple[Path, str]:
    """The checkpoint as the Hugging Face folder its family has: (the folder, its model_type). A masked LM
    becomes a bert folder (export_bert), a Llama-style language model a llama folder; anything else: ValueError."""
    if hm.cfg.is_encoder_only:
        from viz_transformer.export_bert import write_bert_folder
        return write_bert_folder(hm, out), "bert"
    return write_llama_folder(hm, out), "llama"
