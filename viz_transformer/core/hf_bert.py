"""The BERT family's Hugging Face folders (bert, roberta, distilbert, xlm-roberta) as our encoder-only config,
and their tensor names mapped to ours.

All four: post-norm blocks, a LayerNorm over the embeddings, learned absolute positions (RoBERTa and XLM-R
count them from pad_token_id + 1 = 2), GELU; bert, roberta and xlm-roberta add segment (token_type)
embeddings. With a masked-LM head (…ForMaskedLM) the head's dense layer, activation and LayerNorm run before
the unembedding, which is tied to the token embedding, and its bias; without one (BertModel, a
sentence-transformers module) the model has no trained output (`head: none`).
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch

from viz_transformer.core.checkpoint_files import CheckpointError
from viz_transformer.core.config import LIMITS, ModelConfig

FAMILIES = ("bert", "roberta", "distilbert", "xlm-roberta")
ACTS = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "relu": "relu", "silu": "silu",
        "swish": "silu"}
HEAD_NAMES = ("cls.predictions.", "lm_head.", "vocab_transform.", "vocab_projector.")
Rule = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


def _same(t):
    return t


def has_mlm_head(raw: dict, names: Optional[Iterable[str]] = None) -> bool:
    """Whether the folder holds a masked-LM head: from its tensor names when known, else config.json's
    architectures (…ForMaskedLM, …ForPreTraining)."""
    if names is not None:
        return any(n.startswith(HEAD_NAMES) for n in names)
    return any(str(a).endswith(("ForMaskedLM", "ForPreTraining")) for a in raw.get("architectures") or ())


def bert_config(raw: dict, common: dict, names: Optional[Iterable[str]] = None) -> ModelConfig:
    """Our encoder-only ModelConfig for a BERT-family config.json; CheckpointError in one line for a variant
    that is not supported."""
    family = raw["model_type"]
    if raw.get("is_decoder") or raw.get("add_cross_attention"):
        raise CheckpointError(f"{family} as a decoder (is_decoder / add_cross_attention) is not supported")
    kind = raw.get("position_embedding_type", "absolute")
    if kind not in (None, "absolute"):
        raise CheckpointError(f"{family} with position_embedding_type {kind!r} is not supported (absolute only)")
    distil = family == "distilbert"
    act = raw.get("activation" if distil else "hidden_act", "gelu")
    if act not in ACTS:
        raise CheckpointError(f"{family} activation {act!r} is not supported; supported: {', '.join(ACTS)}")
    head = "mlm" if has_mlm_head(raw, names) else "none"
    if head == "mlm" and family in ("roberta", "xlm-roberta") and ACTS[act] != "gelu":
        raise CheckpointError(f"{family} with hidden_act {act!r}: its masked-LM head uses gelu, the blocks would "
                              "need another activation, which is not supported")
    pad = int(raw.get("pad_token_id", 0 if family in ("bert", "distilbert") else 1))
    offset = pad + 1 if family in ("roberta", "xlm-roberta") else 0     # RoBERTa's positions start after pad
    n_pos = int(raw.get("max_position_embeddings", 512))
    if n_pos - offset < 2:
        raise CheckpointError(f"{family} with max_position_embeddings {n_pos} leaves no room for a text")
    if distil:
        d, heads, layers, ff = (int(raw[k]) for k in ("dim", "n_heads", "n_layers", "hidden_dim"))
        types, eps = 0, 1e-12                                       # DistilBERT's LayerNorms: eps 1e-12, fixed
    else:
        d, heads, layers, ff = (int(raw[k]) for k in ("hidden_size", "num_attention_heads", "num_hidden_layers",
                                                      "intermediate_size"))
        types, eps = int(raw.get("type_vocab_size", 2)), float(raw.get("layer_norm_eps", 1e-12))
    return ModelConfig(**{**common, **dict(
        architecture="encoder_only", n_encoder_layers=layers, n_decoder_layers=0, d_model=d, n_heads=heads,
        d_ff=ff, activation=ACTS[act], norm="post", norm_eps=eps, positional="learned", pos_offset=offset,
        max_len=min(n_pos - offset, LIMITS["max_len"]), embed_norm=True, type_vocab_size=types,
        scale_embeddings=False, tie_embeddings=bool(raw.get("tie_word_embeddings", True)), head=head,
        pad_id=pad, forced_eos=False)})


def _prefix(names: set[str], family: str) -> str:
    """The base model's prefix in a …ForMaskedLM file ("bert.", "roberta.", "distilbert."), "" in a bare one."""
    pre = {"bert": "bert.", "roberta": "roberta.", "xlm-roberta": "roberta.", "distilbert": "distilbert."}[family]
    return pre if any(n.startswith(pre) for n in names) else ""


def _pairs(rules: dict, theirs: str, ours: str) -> None:
    for p in ("weight", "bias"):
        rules[f"{theirs}.{p}"] = [(f"{ours}.{p}", _same)]


def bert_rules(family: str):
    """(rules(cfg, names) -> {HF name: [(our name, transform)]}, ignored(name) -> bool) for a family."""
    def rules(cfg: ModelConfig, names: set[str]) -> dict[str, list[Rule]]:
        pre = _prefix(names, family)
        out: dict[str, list[Rule]] = {f"{pre}embeddings.word_embeddings.weight": [("embed.W_E.weight", _same)],
                                      f"{pre}embeddings.position_embeddings.weight": [("embed.pos.weight", _same)]}
        _pairs(out, f"{pre}embeddings.LayerNorm", "embed.norm")
        if cfg.type_vocab_size:
            out[f"{pre}embeddings.token_type_embeddings.weight"] = [("embed.W_type.weight", _same)]
        for i in range(cfg.n_encoder_layers):
            o = f"encoder.{i}."
            if family == "distilbert":
                h = f"{pre}transformer.layer.{i}."
                parts = {"attention.q_lin": "self_attn.W_Q", "attention.k_lin": "self_attn.W_K",
                         "attention.v_lin": "self_attn.W_V", "attention.out_lin": "self_attn.W_O",
                         "sa_layer_norm": "ln1", "ffn.lin1": "ff.W_in", "ffn.lin2": "ff.W_out",
                         "output_layer_norm": "ln2"}
            else:
                h = f"{pre}encoder.layer.{i}."
                parts = {"attention.self.query": "self_attn.W_Q", "attention.self.key": "self_attn.W_K",
                         "attention.self.value": "self_attn.W_V", "attention.output.dense": "self_attn.W_O",
                         "attention.output.LayerNorm": "ln1", "intermediate.dense": "ff.W_in",
                         "output.dense": "ff.W_out", "output.LayerNorm": "ln2"}
            for theirs, ours in parts.items():
                _pairs(out, h + theirs, o + ours)
        if cfg.head == "mlm":
            dense, norm, bias, decoder = {
                "bert": ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                         "cls.predictions.bias", "cls.predictions.decoder.weight"),
                "distilbert": ("vocab_transform", "vocab_layer_norm", "vocab_projector.bias",
                               "vocab_projector.weight")}.get(
                family, ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder.weight"))
            _pairs(out, dense, "head_transform.0")
            _pairs(out, norm, "head_transform.2")
            used = decoder.replace(".weight", ".bias")     # what transformers adds: the decoder's own bias, tied to
            out[used if used in names else bias] = [("lm_head.bias", _same)]      # `bias` unless saved apart
            if not cfg.tie_embeddings:
                out[decoder] = [("lm_head.weight", _same)]
        return out

    def ignored(name: str) -> bool:
        """What our model does not hold: the pooler and the next-sentence head (classification), the position
        ids buffer, the tied copy of the embedding in the head and its bias's second name."""
        return (name.endswith("position_ids") or ".pooler." in f".{name}" or name.startswith("cls.seq_relationship.")
                or name in ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "lm_head.decoder.weight",
                            "lm_head.decoder.bias", "vocab_projector.weight", "cls.predictions.bias", "lm_head.bias"))
    return rules, ignored
