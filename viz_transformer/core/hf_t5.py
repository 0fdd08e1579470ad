"""T5's Hugging Face folders (t5: v1.0, v1.1 and FLAN-T5; mt5) as our encoder-decoder config, and their tensor
names mapped to ours.

T5: pre-norm RMSNorm blocks with no biases anywhere, no positional table but a learned relative position bias
(a scalar per offset bucket and head, built in layer 0 of each stack: both ways in the encoder, causal in the
decoder, none in cross-attention), scores not divided by √d_head, a ReLU feed-forward (v1.0) or a gated GELU
(gated-gelu: v1.1, mT5, FLAN-T5), one embedding shared by encoder and decoder, decoding started from the pad
id; when the output matrix is the embedding (v1.0) the decoder's last residual is scaled by d_model^-0.5.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch

from viz_transformer.core.checkpoint_files import CheckpointError
from viz_transformer.core.config import LIMITS, ModelConfig

FAMILIES = ("t5", "mt5")
ACTS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "silu": "silu"}
Rule = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


def _same(t):
    return t


def t5_config(raw: dict, gen: dict, common: dict, names: Optional[Iterable[str]] = None) -> ModelConfig:
    """Our ModelConfig for a T5-family config.json; CheckpointError in one line for what is not supported.
    names: the weights' tensor names (an lm_head.weight of its own: the output is not the embedding)."""
    family = raw["model_type"]
    if raw.get("is_encoder_decoder") is False or raw.get("is_decoder"):
        raise CheckpointError(f"{family} without its decoder (T5EncoderModel) is not supported")
    proj = str(raw.get("feed_forward_proj", "relu"))
    gated, act = proj.startswith("gated-"), proj.split("-")[-1]
    act = "gelu_new" if proj == "gated-gelu" else act              # transformers' rule: gated-gelu is gelu_new
    if act not in ACTS or proj.count("-") > 1 or ("-" in proj and not gated):
        raise CheckpointError(f"{family} feed_forward_proj {proj!r} is not supported")
    own_head = names is not None and "lm_head.weight" in set(names)
    scale = raw.get("scale_decoder_outputs")                        # transformers 5 writes it; 4 implies it from the tie
    if scale is None:                                               # (mT5's code never scales: its output is untied)
        scale = family == "t5" and bool(raw.get("tie_word_embeddings", True))
    pad = int(common["pad_id"]) if common["pad_id"] >= 0 else 0
    start = int(gen.get("decoder_start_token_id", raw.get("decoder_start_token_id", pad)) or 0)
    layers = int(raw.get("num_layers", 6))
    return ModelConfig(**{**common, **dict(
        architecture="encoder_decoder", n_encoder_layers=layers,
        n_decoder_layers=int(raw.get("num_decoder_layers") or layers), d_model=int(raw["d_model"]),
        n_heads=int(raw["num_heads"]), head_dim=int(raw["d_kv"]), d_ff=int(raw["d_ff"]), activation=ACTS[act],
        ffn="gated" if gated else "mlp", norm="pre", norm_type="rms", norm_eps=float(raw.get("layer_norm_epsilon", 1e-6)),
        positional="relative", rel_buckets=int(raw.get("relative_attention_num_buckets", 32)),
        rel_max_distance=int(raw.get("relative_attention_max_distance", 128)),
        max_len=min(int(raw.get("n_positions") or 512), LIMITS["max_len"]), qkv_bias=False, out_bias=False,
        ffn_bias=False, scale_embeddings=False, tie_embeddings=not own_head, output_scale=scale,
        pad_id=pad, bos_id=start)})


def t5_rules(cfg: ModelConfig, names: set[str]) -> dict[str, list[Rule]]:
    """HF name -> [(our name, transform)]: shared.weight is the encoder's and the decoder's embedding (and the
    output, when tied); block i's layer.0 is self-attention, a decoder's layer.1 cross-attention, the last the FFN."""
    embed = next((n for n in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
                  if n in names), "shared.weight")
    rules: dict[str, list[Rule]] = {
        embed: [("src_embed.W_E.weight", _same)] + ([] if cfg.tie_embeddings else [("tgt_embed.W_E.weight", _same)]),
        "encoder.final_layer_norm.weight": [("encoder_norm.weight", _same)],
        "decoder.final_layer_norm.weight": [("decoder_norm.weight", _same)]}
    if not cfg.tie_embeddings:
        rules["lm_head.weight"] = [("lm_head.weight", _same)]
    attn = {"q": "W_Q", "k": "W_K", "v": "W_V", "o": "W_O"}
    ffn = {"wi": "W_in", "wi_0": "W_gate", "wi_1": "W_in", "wo": "W_out"}
    for part, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(n):
            h, o = f"{part}.block.{i}.layer.", f"{part}.{i}."
            subs = [("0", "SelfAttention", "self_attn", "ln1")]
            if part == "decoder":
                subs.append(("1", "EncDecAttention", "cross_attn", "ln_cross"))
            for j, theirs, ours, norm in subs:
                for a, b in attn.items():
                    rules[f"{h}{j}.{theirs}.{a}.weight"] = [(f"{o}{ours}.{b}.weight", _same)]
                rules[f"{h}{j}.layer_norm.weight"] = [(f"{o}{norm}.weight", _same)]
            last = str(len(subs))
            for a, b in ffn.items():
                rules[f"{h}{last}.DenseReluDense.{a}.weight"] = [(f"{o}ff.{b}.weight", _same)]
            rules[f"{h}{last}.layer_norm.weight"] = [(f"{o}ln2.weight", _same)]
        rules[f"{part}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = [
            (f"{part}.0.self_attn.rel_bias.weight", _same)]
    return rules


def t5_ignored(name: str) -> bool:
    """The tied copies of the shared embedding (each stack's embed_tokens; the output's, when tied)."""
    return name in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")


# -- the tokenizer from spiece.model (a folder without tokenizer.json) ----------------------------------
def spiece_json(path, extra_ids: int = 100) -> str:
    """A tokenizer.json text for T5's SentencePiece model, as transformers' T5Tokenizer builds it from spiece.model:
    the Unigram pieces and scores, the model's own normalisation (its precompiled charsmap), ▁ before every word,
    </s> after the text, and the sentinels <extra_id_{extra_ids - 1}> .. <extra_id_0> after the pieces."""
    import json

    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    proto = pb.ModelProto()
    try:
        proto.ParseFromString(open(path, "rb").read())
    except Exception as e:                                   # protobuf's DecodeError
        raise CheckpointError(f"{path} is not a SentencePiece model ({str(e)[:200]})") from None
    if not proto.pieces:
        raise CheckpointError(f"{path} is not a SentencePiece model (no pieces)")
    vocab = [(p.piece, p.score) for p in proto.pieces] + [(f"<extra_id_{i}>", 0.0) for i in reversed(range(extra_ids))]
    unk = next((i for i, p in enumerate(proto.pieces) if p.type == pb.ModelProto.SentencePiece.UNKNOWN), 2)
    tok = Tokenizer(models.Unigram(vocab, unk_id=unk, byte_fallback=False))
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        tok.normalizer = normalizers.Precompiled(charsmap)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    specials = [p.piece for p in proto.pieces if p.type == pb.ModelProto.SentencePiece.CONTROL or p.piece == "<unk>"]
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials]
                           + [AddedToken(f"<extra_id_{i}>", normalized=False, special=True)
                              for i in reversed(range(extra_ids))])
    eos = tok.token_to_id("</s>")
    if eos is not None:
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                           special_tokens=[("</s>", eos)])
    return json.dumps(json.loads(tok.to_str()))
