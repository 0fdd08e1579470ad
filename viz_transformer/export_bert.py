"""One of our masked LMs written as a Hugging Face `bert` folder (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json), for a model trained here with BERT's parts: post-norm, learned absolute positions,
segment embeddings, a LayerNorm over the embeddings, no embedding scale, GELU, the masked-LM head.

    python -m viz_transformer export-hf checkpoints/zh-en-bert out/zh-en-bert

transformers opens the folder as BertForMaskedLM with the same logits, and so does `load_checkpoint` (as an
imported folder). The SentencePiece model becomes a `tokenizers` Unigram model with byte fallback; [MASK] takes
the space before it (lstrip), as our tokenizer's encode does, and the post-processor adds [CLS] … [SEP].
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from viz_transformer.core.checkpoint import unique_state_dict
from viz_transformer.run.capture import HookedModel

NEEDS = {"architecture": "encoder_only", "head": "mlm", "norm": "post", "norm_type": "layer", "positional": "learned",
         "pos_offset": 0, "embed_norm": True, "scale_embeddings": False, "activation": "gelu", "ffn": "mlp",
         "qkv_bias": True, "out_bias": True, "ffn_bias": True, "qk_norm": False, "tie_embeddings": True,
         "logits_bias": False, "n_kv_heads": 0, "head_dim": 0, "sliding_window": 0}
UNUSED_SCORE = -1e6      # a piece SentencePiece never emits (one_piece_per_cjk_character): never the best cut


def bert_config(cfg) -> dict:
    wrong = {k: getattr(cfg, k) for k, v in NEEDS.items() if getattr(cfg, k) != v}
    if wrong:
        raise ValueError(f"only a BERT-style masked LM can be written as a bert folder; this one has "
                         f"{', '.join(f'{k}={v!r}' for k, v in wrong.items())}")
    return {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": cfg.vocab_size,
            "hidden_size": cfg.d_model, "num_hidden_layers": cfg.n_encoder_layers,
            "num_attention_heads": cfg.n_heads, "intermediate_size": cfg.d_ff, "hidden_act": "gelu",
            "max_position_embeddings": cfg.max_len, "type_vocab_size": max(cfg.type_vocab_size, 1),
            "layer_norm_eps": cfg.norm_eps, "pad_token_id": cfg.pad_id, "hidden_dropout_prob": cfg.dropout,
            "attention_probs_dropout_prob": cfg.dropout, "position_embedding_type": "absolute",
            "tie_word_embeddings": True, "torch_dtype": "float32"}


def bert_weights(model) -> dict[str, torch.Tensor]:
    cfg, ours = model.cfg, unique_state_dict(model)
    out = {"bert.embeddings.word_embeddings.weight": ours["embed.W_E.weight"],
           "bert.embeddings.position_embeddings.weight": ours["embed.pos.weight"],
           "bert.embeddings.LayerNorm.weight": ours["embed.norm.weight"],
           "bert.embeddings.LayerNorm.bias": ours["embed.norm.bias"],
           "cls.predictions.transform.dense.weight": ours["head_transform.0.weight"],
           "cls.predictions.transform.dense.bias": ours["head_transform.0.bias"],
           "cls.predictions.transform.LayerNorm.weight": ours["head_transform.2.weight"],
           "cls.predictions.transform.LayerNorm.bias": ours["head_transform.2.bias"],
           "cls.predictions.bias": ours["lm_head.bias"]}
    out["bert.embeddings.token_type_embeddings.weight"] = (
        ours["embed.W_type.weight"] if cfg.type_vocab_size else torch.zeros(1, cfg.d_model))   # no segments: adds 0
    parts = {"self_attn.W_Q": "attention.self.query", "self_attn.W_K": "attention.self.key",
             "self_attn.W_V": "attention.self.value", "self_attn.W_O": "attention.output.dense",
             "ln1": "attention.output.LayerNorm", "ff.W_in": "intermediate.dense", "ff.W_out": "output.dense",
             "ln2": "output.LayerNorm"}
    for i in range(cfg.n_encoder_layers):
        for mine, theirs in parts.items():
            for p in ("weight", "bias"):
                out[f"bert.encoder.layer.{i}.{theirs}.{p}"] = ours[f"encoder.{i}.{mine}.{p}"]
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def bert_tokenizer_json(tok) -> dict:
    """Our masked LM's SentencePiece model as a tokenizers Unigram model with byte fallback: the specials and
    [MASK] as added tokens, SentencePiece's ▁ before the first word only (Metaspace, prepend "first": a section
    after [MASK] starts a word only where a space stood), [CLS] a [SEP] (b [SEP]) around the text."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    m.ParseFromString(tok.model_proto)
    sp = tok.sp
    vocab = [[p.piece, UNUSED_SCORE if p.type == pb.ModelProto.SentencePiece.UNUSED else float(p.score)]
             for p in m.pieces]
    specials = sorted(tok.specials)
    cls, sep = sp.id_to_piece(tok.bos_id), sp.id_to_piece(tok.eos_id)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": i == tok.mask_id,
                          "rstrip": False, "normalized": False, "special": True} for i in specials],
        "normalizer": {"type": "Sequence", "normalizers": [        # SentencePiece's nmt_nfkc, extra spaces removed
            {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": cls, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": sep, "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": cls, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": sep, "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": sep, "type_id": 1}}],
                           "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]}
                                              for t, i in ((cls, tok.bos_id), (sep, tok.eos_id))}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "Unigram", "unk_id": tok.unk_id, "vocab": vocab, "byte_fallback": True},
    }


def write_bert_folder(hm: HookedModel, out) -> Path:
    """The masked LM as a Hugging Face bert folder at `out` (created)."""
    cfg, tok = hm.cfg, hm.tokenizer
    conf = bert_config(cfg)
    if getattr(tok, "mask_id", None) is None or not hasattr(tok, "model_proto"):
        raise ValueError("only a masked LM trained here (its SentencePiece tokenizer holds [MASK]) can be written "
                         "as a bert folder")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(conf, indent=1) + "\n", encoding="utf-8")
    save_file(bert_weights(hm.model), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "tokenizer.json").write_text(json.dumps(bert_tokenizer_json(tok), ensure_ascii=False), encoding="utf-8")
    sp = tok.sp
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "cls_token": sp.id_to_piece(tok.bos_id),
        "sep_token": sp.id_to_piece(tok.eos_id), "unk_token": sp.id_to_piece(tok.unk_id),
        "pad_token": sp.id_to_piece(tok.pad_id), "mask_token": tok.mask_token, "model_max_length": cfg.max_len,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]},
        indent=1) + "\n", encoding="utf-8")
    return out
