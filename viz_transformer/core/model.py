"""The instrumented Transformer: encoder-decoder, decoder-only, prefix-LM or encoder-only, built from scratch.

Composition follows the Annotated Transformer (encode once, decode many times); every
interesting tensor passes through a named HookPoint (TransformerLens naming).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import nn

from viz_transformer.core.attention import MultiHeadAttention
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.hooks import Cache, HookFn, HookPoint, NamesFilter, hooks_active, name_hook_points, resolve_names
from viz_transformer.core.masks import padding_mask, self_attention_mask
from viz_transformer.core.positional import RELATIVE_DIVISOR, PositionalEncoding, RelativeBias


def make_norm(cfg: ModelConfig, dim: Optional[int] = None) -> nn.Module:
    """LayerNorm, or RMSNorm (no centring, no bias: x / rms(x) · w) for cfg.norm_type == "rms"."""
    dim = dim or cfg.d_model
    return nn.RMSNorm(dim, eps=cfg.norm_eps) if cfg.norm_type == "rms" else nn.LayerNorm(dim, eps=cfg.norm_eps)


ACTIVATION = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_new": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU}


class Embed(nn.Module):
    """Token embedding (× √d_model unless cfg.scale_embeddings is off) plus an additive positional encoding
    (sinusoidal or learned; none for RoPE, which rotates q and k instead, nor for T5's relative bias, added to
    the scores), plus segment embeddings and a norm
    over the sum when the config has them (BERT), then dropout."""

    def __init__(self, cfg: ModelConfig, W_E: Optional[nn.Embedding] = None, vocab: int = 0):
        super().__init__()
        self.W_E = W_E if W_E is not None else nn.Embedding(vocab or cfg.vocab_size, cfg.d_model)
        self.additive = cfg.positional not in ("rope", "relative")
        self.pos_offset = cfg.pos_offset
        if self.additive:
            self.pos = PositionalEncoding(cfg.positional, cfg.max_len + cfg.pos_offset, cfg.d_model)
            self.hook_pos = HookPoint()   # [pos, d_model]  positional rows actually added
        if cfg.type_vocab_size:
            self.W_type = nn.Embedding(cfg.type_vocab_size, cfg.d_model)
            self.hook_type = HookPoint()  # [batch, pos, d_model]  segment (token_type) embeddings added
        if cfg.embed_norm:
            self.norm = make_norm(cfg)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_tok = HookPoint()   # [batch, pos, d_model]  token embeddings (after scaling)

    def forward(self, ids: torch.Tensor, offset: int = 0, types: Optional[torch.Tensor] = None) -> torch.Tensor:
        """types: [batch, pos] segment ids (0 for every position when not given), for a config with them."""
        tok = self.W_E(ids)
        x = self.hook_tok(tok * self.scale if self.scale != 1.0 else tok)       # (B, T, d)
        if self.additive:
            x = x + self.hook_pos(self.pos(ids.shape[1], offset + self.pos_offset))   # (T, d)
        if hasattr(self, "W_type"):
            types = torch.zeros_like(ids) if types is None else types.to(ids.device)
            x = x + self.hook_type(self.W_type(types))                          # (B, T, d)
        if hasattr(self, "norm"):
            x = self.norm(x)
        return self.drop(x)


class FeedForward(nn.Module):
    """mlp: W_out(act(W_in x)); gated (SwiGLU with silu): W_out(act(W_gate x) · W_in x)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gated = cfg.ffn == "gated"
        if self.gated:
            self.W_gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.ffn_bias)
        self.W_in = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.ffn_bias)
        self.act = ACTIVATION[cfg.activation]()
        self.W_out = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.ffn_bias)
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_post = HookPoint()  # [batch, pos, d_ff]  after the activation (times the gate's other half)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.W_gate(x)) * self.W_in(x) if self.gated else self.act(self.W_in(x))
        return self.W_out(self.drop(self.hook_post(h)))


def attention_module(cfg: ModelConfig, cross: bool = False, bias_of: str = "") -> MultiHeadAttention:
    """One attention block of this config: grouped-query heads, biases, q/k norm, RoPE on self-attention; with
    relative positions unscaled scores, and bias_of ("encoder": both ways, "decoder": causal) builds the stack's
    relative position bias here (layer 0's self-attention)."""
    relative = cfg.positional == "relative"
    rel_bias = RelativeBias(cfg.rel_buckets, cfg.rel_max_distance, cfg.n_heads, bias_of == "encoder") \
        if relative and bias_of and not cross else None
    return MultiHeadAttention(d_model=cfg.d_model, n_heads=cfg.n_heads, dropout=cfg.dropout, n_kv_heads=cfg.n_kv_heads,
                              d_head=cfg.head_dim, qkv_bias=cfg.qkv_bias, out_bias=cfg.out_bias,
                              qk_norm=(lambda d: make_norm(cfg, d)) if cfg.qk_norm else None,
                              rope=cfg if cfg.positional == "rope" and not cross else None,
                              divisor=RELATIVE_DIVISOR if relative else None, rel_bias=rel_bias)


class Block(nn.Module):
    """Shared residual wiring. pre-norm: x + f(LN(x)); post-norm: LN(x + f(x))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.drop = nn.Dropout(cfg.dropout)

    def sublayer(self, x: torch.Tensor, ln: nn.LayerNorm, fn) -> torch.Tensor:
        if self.pre:
            return x + self.drop(fn(ln(x)))
        return ln(x + self.drop(fn(x)))


class EncoderBlock(Block):
    def __init__(self, cfg: ModelConfig, first: bool = False):
        super().__init__(cfg)
        self.self_attn = attention_module(cfg, bias_of="encoder" if first else "")
        self.ff = FeedForward(cfg)
        self.ln1, self.ln2 = make_norm(cfg), make_norm(cfg)
        self.hook_resid_pre = HookPoint()   # [batch, pos, d_model]
        self.hook_resid_mid = HookPoint()   # [batch, pos, d_model]  after self-attention
        self.hook_resid_post = HookPoint(passes_on=True)  # [batch, pos, d_model]  = next block's resid_pre

    def forward(self, x: torch.Tensor, mask: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(self.sublayer(x, self.ln1, lambda h: self.self_attn(h, h, mask, bias=bias)[0]))
        return self.hook_resid_post(self.sublayer(x, self.ln2, self.ff))


class DecoderBlock(Block):
    def __init__(self, cfg: ModelConfig, first: bool = False):
        super().__init__(cfg)
        self.self_attn = attention_module(cfg, bias_of="decoder" if first else "")
        self.has_cross = cfg.is_encoder_decoder
        if self.has_cross:
            self.cross_attn = attention_module(cfg, cross=True)
            self.ln_cross = make_norm(cfg)
            self.hook_resid_cross = HookPoint()  # [batch, pos, d_model]  after cross-attention
        self.ff = FeedForward(cfg)
        self.ln1, self.ln2 = make_norm(cfg), make_norm(cfg)
        self.hook_resid_pre = HookPoint()   # [batch, pos, d_model]
        self.hook_resid_mid = HookPoint()   # [batch, pos, d_model]  after masked self-attention
        self.hook_resid_post = HookPoint(passes_on=True)  # [batch, pos, d_model]  = next block's resid_pre

    def forward(self, x, self_mask, memory=None, cross_mask=None, layer_cache: Optional[dict] = None, offset: int = 0,
                bias: Optional[torch.Tensor] = None):
        """layer_cache (incremental decoding): {"self": (K, V) of earlier positions, "cross": (K, V)};
        offset: the position of x's first row (RoPE); bias: the position bias self-attention adds (T5)."""
        x = self.hook_resid_pre(x)
        past = layer_cache.get("self") if layer_cache is not None else None
        new_kv = {}

        def self_fn(h):
            out, new_kv["self"] = self.self_attn(h, h, self_mask, past=past, offset=offset, bias=bias)
            return out
        x = self.hook_resid_mid(self.sublayer(x, self.ln1, self_fn))
        if self.has_cross:
            cross_kv = layer_cache.get("cross") if layer_cache is not None else None

            def cross_fn(h):
                out, new_kv["cross"] = self.cross_attn(h, memory, cross_mask, kv=cross_kv)
                return out
            x = self.hook_resid_cross(self.sublayer(x, self.ln_cross, cross_fn))
        if layer_cache is not None:
            layer_cache.update(new_kv)
        return self.hook_resid_post(self.sublayer(x, self.ln2, self.ff))


@dataclass
class KVCache:
    """State for incremental decoding: one dict of cached (K, V) per decoder layer."""
    layers: list
    ids: Optional[torch.Tensor] = None          # decoder ids fed so far [B, T]
    memory: Optional[torch.Tensor] = None       # encoder output [B, S, d]
    src_mask: Optional[torch.Tensor] = None     # [B, 1, 1, S]
    prefix_len: Optional[int] = None
    extra: dict = field(default_factory=dict)

    @property
    def length(self) -> int:
        return 0 if self.ids is None else self.ids.shape[1]

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows `index` (beam search: each surviving beam's parent)."""
        for layer in self.layers:
            for key, (k, v) in list(layer.items()):
                layer[key] = (k.index_select(0, index.to(k.device)), v.index_select(0, index.to(v.device)))
        for name in ("ids", "memory", "src_mask"):
            t = getattr(self, name)
            if t is not None:
                setattr(self, name, t.index_select(0, index.to(t.device)))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.host_outputs = False     # load_checkpoint sets it: logits as float32 on the CPU (training keeps the device's)
        if cfg.is_encoder_only:
            self.embed = Embed(cfg)
            self.encoder = nn.ModuleList([EncoderBlock(cfg, i == 0) for i in range(cfg.n_encoder_layers)])
            self.encoder_norm = make_norm(cfg) if cfg.norm == "pre" else nn.Identity()
        elif cfg.is_encoder_decoder:
            self.src_embed = Embed(cfg)
            shared = cfg.tie_embeddings and not cfg.tgt_vocab_size       # a target vocabulary of its own: its own rows
            self.tgt_embed = Embed(cfg, self.src_embed.W_E if shared else None, cfg.out_vocab)
            self.encoder = nn.ModuleList([EncoderBlock(cfg, i == 0) for i in range(cfg.n_encoder_layers)])
            self.encoder_norm = make_norm(cfg) if cfg.norm == "pre" else nn.Identity()
        else:
            self.embed = Embed(cfg)
        self.decoder = nn.ModuleList([DecoderBlock(cfg, i == 0) for i in range(cfg.n_decoder_layers)])
        self.decoder_norm = make_norm(cfg) if cfg.norm == "pre" and cfg.n_decoder_layers else nn.Identity()
        if cfg.head == "mlm":          # BERT's prediction head: dense, activation, norm, then the unembedding + bias
            self.head_transform = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_model), ACTIVATION[cfg.activation](),
                                                make_norm(cfg))
        self.lm_head = nn.Linear(cfg.d_model, cfg.out_vocab, bias=cfg.head == "mlm")
        if cfg.logits_bias:
            self.register_buffer("logits_bias", torch.zeros(cfg.out_vocab))    # Marian's final_logits_bias
        self.apply(self._init)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.dec_embed.W_E.weight
        self.hook_names = name_hook_points(self)
        self.n_layers = {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers}

    def _init(self, m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=self.cfg.d_model ** -0.5)   # ×√d in Embed gives unit variance

    @property
    def dec_embed(self) -> Embed:
        return self.tgt_embed if self.cfg.is_encoder_decoder else self.embed

    @property
    def enc_embed(self) -> Embed:
        return self.src_embed if self.cfg.is_encoder_decoder else self.embed

    # -- the two halves ---------------------------------------------------------------------
    def encode(self, src: torch.Tensor, types: Optional[torch.Tensor] = None):
        """src [B, S] -> (memory [B, S, d], src_mask [B, 1, 1, S]), on the model's device. types: [B, S]
        segment ids (encoder-only models with segment embeddings). Padding is the only mask: attention
        runs both ways."""
        src = src.to(self.device)
        src_mask = padding_mask(src, self.cfg.pad_id)
        x = self.enc_embed(src, types=types)
        bias = self.position_bias(self.encoder, src.shape[1], src.shape[1])
        for block in self.encoder:
            x = block(x, src_mask, bias)
        return self.encoder_norm(x), src_mask

    def decode(self, ids: torch.Tensor, memory=None, src_mask=None, prefix_len=None,
               cache: Optional[KVCache] = None, logits_at: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Decoder ids [B, T] -> logits [B, T, vocab]. With `cache`, ids are only the new positions.
        logits_at: bool [B, T]; logits only at those positions, as [N, vocab] (training: not at padding).

        The cache is updated only after the whole step has succeeded: a step that raises (e.g. past
        max_len) leaves it exactly as it was, so decoding can go on or be retried."""
        cfg = self.cfg
        if cfg.is_encoder_only:
            raise ValueError("an encoder-only model has no decoder: run it with forward(ids, types=...)")
        ids = ids.to(self.device)                   # inputs come from the CPU; the weights may be on a GPU
        if isinstance(prefix_len, torch.Tensor):
            prefix_len = prefix_len.to(self.device)
        offset, layers = 0, None
        all_ids = ids
        if cache is not None:
            offset = cache.length
            if offset + ids.shape[1] > cfg.max_len:
                raise ValueError(f"decoding past this model's {cfg.max_len} positions "
                                 f"({offset} cached + {ids.shape[1]} new)")
            all_ids = ids if cache.ids is None else torch.cat([cache.ids, ids], dim=1)
            memory, src_mask, prefix_len = cache.memory, cache.src_mask, cache.prefix_len
            layers = [dict(layer) for layer in cache.layers]      # written into, committed at the end
        pad = cfg.pad_id if cfg.bos_id != cfg.pad_id else -1    # Marian starts decoding from the pad id: a real key
        self_mask = self_attention_mask(all_ids, pad, cfg.architecture, causal=True, prefix_len=prefix_len,
                                        window=cfg.sliding_window)[:, :, offset:, :]   # (B, 1, T, offset+T)
        x = self.dec_embed(ids, offset)
        bias = self.position_bias(self.decoder, ids.shape[1], offset + ids.shape[1], offset)
        for i, block in enumerate(self.decoder):
            x = block(x, self_mask, memory, src_mask, layers[i] if layers is not None else None, offset, bias)
        if logits_at is not None:
            x = x[logits_at.to(self.device)]                                  # (N, d)
        logits = self.unembed(x)
        if cache is not None:
            cache.ids, cache.layers = all_ids, layers
        return logits

    def relative_bias(self, part: str):
        """The RelativeBias module of the "encoder" or "decoder" stack (T5's, in its layer 0), or None."""
        stack = self.encoder if part == "encoder" and hasattr(self, "encoder") else self.decoder if part == "decoder" else None
        first = stack[0].self_attn if stack is not None and len(stack) else None
        return getattr(first, "rel_bias", None)

    def position_bias(self, stack: nn.ModuleList, n_q: int, n_k: int, offset: int = 0) -> Optional[torch.Tensor]:
        """The relative position bias [1, head, n_q, n_k] every layer of `stack` adds, from its layer 0 (queries
        from position `offset` on, as in cached decoding); None for a model without one."""
        first = stack[0].self_attn if len(stack) else None
        return first.position_bias(n_q, n_k, offset) if first is not None and hasattr(first, "rel_bias") else None

    @property
    def device(self) -> torch.device:
        """Where the weights are (load_checkpoint's device): inputs are moved there, logits come back to the CPU."""
        return self.lm_head.weight.device

    def unembed(self, resid: torch.Tensor) -> torch.Tensor:
        """The last residual stream [..., d_model] -> logits [..., vocab]: final norm, unembedding, logits bias;
        a residual from the CPU (a lens) is moved to the weights' device and dtype; with host_outputs (a loaded
        model) the logits come back as float32 on the CPU, whatever the weights' device and dtype."""
        resid = resid.to(self.device, self.lm_head.weight.dtype)
        x = self.encoder_norm(resid) if self.cfg.is_encoder_only else self.decoder_norm(resid)
        if self.cfg.output_scale:
            x = x * self.cfg.d_model ** -0.5                                  # a tied T5's rescaling
        if self.cfg.head == "mlm":
            x = self.head_transform(x)
        logits = self.lm_head(x)
        logits = logits + self.logits_bias if self.cfg.logits_bias else logits
        return logits.to("cpu", torch.float32) if self.host_outputs else logits

    def forward(self, ids: torch.Tensor, tgt: Optional[torch.Tensor] = None, prefix_len=None,
                logits_at: Optional[torch.Tensor] = None, types: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Encoder-decoder: ids = source [B, S], tgt = decoder input [B, T] (teacher forcing).
        Decoder-only / prefix-LM: ids = the sequence [B, T]. Encoder-only: ids = the sequence [B, S], types its
        segment ids [B, S]. Returns logits [B, T, vocab], or [N, vocab] at the N True positions of logits_at
        [B, T] (training skips the vocabulary projection elsewhere)."""
        if self.cfg.is_encoder_only:
            if tgt is not None:
                raise ValueError("an encoder-only model reads one sequence and has no decoder input (tgt)")
            x, _ = self.encode(ids, types)
            return self.unembed(x[logits_at.to(self.device)] if logits_at is not None else x)
        if self.cfg.is_encoder_decoder:
            if tgt is None:
                raise ValueError("an encoder-decoder model needs tgt (the decoder input) as well")
            memory, src_mask = self.encode(ids)
            return self.decode(tgt, memory, src_mask, logits_at=logits_at)
        if tgt is not None:
            raise ValueError(f"a {self.cfg.architecture} model takes a single sequence, not tgt")
        return self.decode(ids, prefix_len=prefix_len, logits_at=logits_at)

    # -- incremental decoding ---------------------------------------------------------------
    def new_cache(self, src: Optional[torch.Tensor] = None, prefix_len: Optional[int] = None) -> KVCache:
        if self.cfg.is_encoder_only:
            raise ValueError("an encoder-only model does not generate: it has no decoder to continue a text")
        cache = KVCache(layers=[{} for _ in self.decoder], prefix_len=prefix_len)
        if self.cfg.is_encoder_decoder:
            if src is None:
                raise ValueError("an encoder-decoder model needs the source to start decoding")
            cache.memory, cache.src_mask = self.encode(src)
        return cache

    # -- capture API ------------------------------------------------------------------------
    def run_with_cache(self, *args, names_filter: NamesFilter = None, **kwargs):
        """Run forward (no grad) and return (output, Cache of detached CPU tensors sharing no memory)."""
        cache = Cache(n_layers=self.n_layers)
        names = resolve_names(names_filter, self.hook_names)

        def save(x, hook):
            cache.store(hook.name, x, fresh=not hook.passes_on)
        with torch.no_grad(), hooks_active([(n, save) for n in names]):
            out = self(*args, **kwargs)
        return out, cache

    def resolve_hooks(self, fwd_hooks) -> list[tuple[str, HookFn]]:
        """(names filter, fn) pairs -> (hook name, fn) pairs; an unknown name raises ValueError."""
        return [(n, fn) for name, fn in (fwd_hooks or ()) for n in resolve_names(name, self.hook_names)]

    def run_with_hooks(self, *args, fwd_hooks: list[tuple[str, HookFn]] = (), **kwargs):
        """Run forward with fn(tensor, hook) -> tensor|None applied at the named points, once."""
        with hooks_active(self.resolve_hooks(fwd_hooks)):
            return self(*args, **kwargs)
