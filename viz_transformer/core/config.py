"""Model configuration: one dataclass that fully describes an architecture.

Saved as `config.json` inside every checkpoint folder; `ModelConfig.from_dict` validates it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

ARCHITECTURES = ("encoder_decoder", "decoder_only", "prefix_lm", "encoder_only")
POSITIONALS = ("sinusoidal", "learned", "rope", "sinusoidal_halves", "relative", "sinusoidal_fairseq")
NORMS = ("pre", "post")
NORM_TYPES = ("layer", "rms")
ACTIVATIONS = ("relu", "gelu", "gelu_new", "silu")
HEADS = ("linear", "mlm", "none")
FFNS = ("mlp", "gated")
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3")
EARLY_STOPPING = ("true", "false", "never")
LIMITS = {"vocab_size": 1 << 18, "tgt_vocab_size": 1 << 18, "d_model": 8192, "n_heads": 256, "n_encoder_layers": 128,   # far above any
          "n_decoder_layers": 128, "d_ff": 65536, "max_len": 1 << 16, "head_dim": 1024,  # model this app can show
          "type_vocab_size": 1024, "pos_offset": 1024, "rel_buckets": 4096}


def early_stopping_rule(value) -> str:
    """Hugging Face's early_stopping (True, False, "never", or our config's "true"/"false"/"never") as our string;
    ValueError for anything else."""
    rule = {True: "true", False: "false"}.get(value, value) if isinstance(value, bool) else value
    if rule not in EARLY_STOPPING:
        raise ValueError(f"early_stopping must be True, False or 'never', not {value!r}")
    return rule


@dataclass
class ModelConfig:
    vocab_size: int = 8000            # shared SentencePiece vocabulary (source and target); the source's if tgt_vocab_size
    tgt_vocab_size: int = 0           # the target's vocabulary (decoder embedding, output); 0: shared with the source
    d_model: int = 256
    n_heads: int = 8
    n_encoder_layers: int = 3         # must be 0 for decoder_only and prefix_lm
    n_decoder_layers: int = 3         # must be 0 for encoder_only
    d_ff: int = 1024
    activation: str = "relu"          # relu | gelu
    dropout: float = 0.1
    max_len: int = 512                # longest sequence the positional encoding covers
    positional: str = "sinusoidal"    # sinusoidal | learned | rope | sinusoidal_halves (Marian's layout) | relative (T5:
                                      # a learned bias per offset bucket and head on the scores, which are not ÷ √d) |
                                      # sinusoidal_fairseq (M2M100 / NLLB: sines first, frequencies 10000^(-i/(d/2-1)))
    norm: str = "pre"                 # pre: x + f(LN(x)); post: LN(x + f(x))
    tie_embeddings: bool = True       # source, target and output share one matrix
    architecture: str = "encoder_decoder"  # encoder_decoder | decoder_only | prefix_lm | encoder_only (BERT)
    pad_id: int = 0
    bos_id: int = 2
    eos_id: int = 3
    sep_id: int = -1                  # [sep] of a decoder-only/prefix-LM translator: [begin] src [sep] tgt [end]; -1: an LM
    # -- components of other families (imported models); the defaults are this project's own Transformer --
    norm_type: str = "layer"          # layer (LayerNorm) | rms (RMSNorm: no mean, no bias)
    norm_eps: float = 1e-5
    ffn: str = "mlp"                  # mlp: W_out(act(W_in x)); gated: W_out(act(W_gate x) * W_in x) (SwiGLU with silu)
    n_kv_heads: int = 0               # key/value heads (grouped-query attention); 0: as many as n_heads
    head_dim: int = 0                 # per-head width; 0: d_model // n_heads
    qkv_bias: bool = True             # biases on the Q, K, V projections
    out_bias: bool = True             # bias on the attention output projection
    ffn_bias: bool = True             # biases in the feed-forward layers
    qk_norm: bool = False             # RMS/LayerNorm over each head's q and k before the rotation (Qwen3)
    sliding_window: int = 0           # a query sees at most this many keys back, itself included; 0: no limit
    scale_embeddings: bool = True     # token embedding × √d_model (this project, Marian); GPT-2, Llama: no
    logits_bias: bool = False         # a fixed bias added to the logits (Marian's final_logits_bias)
    rope_theta: float = 10000.0       # RoPE base wavelength
    rope_type: str = "default"        # default | linear | dynamic | yarn | llama3 (how the frequencies are scaled)
    rope_factor: float = 1.0
    rope_original_max: int = 0        # yarn, llama3, dynamic: the context length the model was trained on
    rope_low_freq_factor: float = 1.0     # llama3
    rope_high_freq_factor: float = 4.0    # llama3
    rope_beta_fast: float = 32.0          # yarn
    rope_beta_slow: float = 1.0           # yarn
    rope_attention_factor: float = 0.0    # yarn: cos and sin are multiplied by it; 0: 0.1·ln(factor) + 1
    rel_buckets: int = 32             # relative: offset buckets (half exact, half logarithmic; per direction in the encoder)
    rel_max_distance: int = 128       # relative: offsets at least this far share the last bucket
    output_scale: bool = False        # the decoder's last residual × d_model^-0.5 before the unembedding (a tied T5)
    prepend_bos: bool = True          # encoding puts [begin] before a prompt; False: the tokenizer adds what it adds
    ban_specials: bool = True         # [pad], [unk] and [begin] are never generated (this project's models)
    forced_eos: bool = False          # the last token a generation may add is [end] (Marian's forced_eos_token_id)
    forced_eos_id: int = -1           # the id forced_eos forces there when it is not [end]; -1: eos_id
    stop_ids: tuple = ()              # ids that end a generation as [end] does (a generation config's eos list)
    repetition_penalty: float = 1.0   # a generation config's: logits of ids already in the sequence ÷ it (× it if < 0)
    num_beams: int = 4                # a generation config's: the beam width when a call names none
    early_stopping: str = "true"      # beam search ends: "true" once num_beams hypotheses have ended; "false" and
                                      # "never" when the best running beam cannot beat them (run.beam.beam_search)
    length_penalty: float = 1.0       # beam search ranks an ended hypothesis by score / length ** length_penalty
    max_new_tokens: int = 0           # tokens generated when a call names none; 0: max_length's rule, else 40
    max_length: int = 0               # a generation config's max_length: prompt + new tokens; 0: none
    # -- encoder-only models (the BERT family) --
    embed_norm: bool = False          # a norm over token + position + segment embeddings (BERT's embeddings.LayerNorm)
    type_vocab_size: int = 0          # segment (token_type) embeddings added to the input; 0: none
    pos_offset: int = 0               # the first position's row of a learned table (RoBERTa: pad_id + 1 = 2; BART,
                                      # mBART: 2) or of M2M100's sinusoidal_fairseq table (pad_id + 1)
    forced_bos_id: int = -1           # the id the decoder's prompt holds after its start token (transformers'
                                      # forced_bos_token_id: BART's <s>); -1: none (a language tokenizer's target
                                      # code takes this place: core.hf_languages)
    head: str = "linear"              # linear: logits = unembed(x); mlm: the masked-LM head's dense, activation
                                      # and norm first, a bias after; none: no trained head (logits = x · W_Eᵀ)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def out_vocab(self) -> int:
        """The target side's vocabulary: rows of the decoder embedding and of the output layer."""
        return self.tgt_vocab_size or self.vocab_size

    @property
    def is_encoder_decoder(self) -> bool:
        return self.architecture == "encoder_decoder"

    @property
    def is_encoder_only(self) -> bool:
        return self.architecture == "encoder_only"

    @property
    def is_translator(self) -> bool:
        """Encoder-decoder, or one sequence holding source [sep] target."""
        return self.is_encoder_decoder or self.sep_id >= 0

    def validate(self) -> None:
        def check(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(f"invalid ModelConfig: {msg}")

        for f in dataclasses.fields(self):     # config.json is hand-editable: 32.0 is not a layer width
            v, t = getattr(self, f.name), type(f.default)
            ok = isinstance(v, bool) if t is bool else \
                isinstance(v, (int, float) if t is float else t) and not isinstance(v, bool)
            check(ok, f"{f.name} must be {t.__name__}, not {v!r}")
        check(self.architecture in ARCHITECTURES, f"architecture {self.architecture!r} not in {ARCHITECTURES}")
        check(self.positional in POSITIONALS, f"positional {self.positional!r} not in {POSITIONALS}")
        check(self.norm in NORMS, f"norm {self.norm!r} not in {NORMS}")
        check(self.activation in ACTIVATIONS, f"activation {self.activation!r} not in {ACTIVATIONS}")
        check(self.norm_type in NORM_TYPES, f"norm_type {self.norm_type!r} not in {NORM_TYPES}")
        check(self.ffn in FFNS, f"ffn {self.ffn!r} not in {FFNS}")
        check(self.rope_type in ROPE_TYPES, f"rope_type {self.rope_type!r} not in {ROPE_TYPES}")
        check(self.head in HEADS, f"head {self.head!r} not in {HEADS}")
        check(self.head == "linear" or self.is_encoder_only, "head mlm and none are for encoder_only models")
        check(self.type_vocab_size >= 0 and self.pos_offset >= 0, "type_vocab_size and pos_offset must be ≥ 0")
        check(self.pos_offset == 0 or self.positional in ("learned", "sinusoidal_fairseq"),
              "pos_offset needs learned or sinusoidal_fairseq positions")
        check(-1 <= self.forced_bos_id < self.out_vocab, "forced_bos_id must be -1 (none) or a vocabulary id")
        check(self.d_model > 0 and self.n_heads > 0, "d_model and n_heads must be positive")
        check(self.head_dim > 0 or self.d_model % self.n_heads == 0,
              f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}), or head_dim set")
        check(self.head_dim >= 0 and self.n_kv_heads >= 0 and self.sliding_window >= 0,
              "head_dim, n_kv_heads and sliding_window must be ≥ 0")
        check(self.n_heads % self.kv_heads == 0, f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads "
                                                 f"({self.kv_heads})")
        check(self.positional != "rope" or self.d_head % 2 == 0, "RoPE needs an even head_dim")
        check(self.rel_buckets >= 4 and self.rel_max_distance > self.rel_buckets // 2,
              "rel_buckets must be ≥ 4 and rel_max_distance above rel_buckets / 2")
        check(all(isinstance(i, int) and 0 <= i < self.out_vocab for i in self.stop_ids),
              "stop_ids must be vocabulary ids")
        check(-1 <= self.forced_eos_id < self.out_vocab, "forced_eos_id must be -1 (eos_id) or a vocabulary id")
        check(self.repetition_penalty > 0, "repetition_penalty must be positive")
        check(self.early_stopping in EARLY_STOPPING, f"early_stopping {self.early_stopping!r} not in {EARLY_STOPPING}")
        check(self.num_beams >= 1 and self.max_new_tokens >= 0 and self.max_length >= 0,
              "num_beams must be ≥ 1, max_new_tokens and max_length ≥ 0")
        check(self.tgt_vocab_size >= 0, "tgt_vocab_size must be ≥ 0 (0: shared with the source)")
        check(self.tgt_vocab_size == 0 or self.is_encoder_decoder, "a separate target vocabulary needs an encoder-decoder")
        check(self.norm_eps > 0 and self.rope_theta > 0 and self.rope_factor > 0, "norm_eps, rope_theta and "
                                                                                  "rope_factor must be positive")
        check(self.vocab_size > max(self.pad_id, self.bos_id, self.eos_id), "vocab_size too small for special ids")
        check(self.out_vocab > max(self.pad_id, self.bos_id, self.eos_id), "tgt_vocab_size too small for special ids")
        if self.is_encoder_only:
            check(self.n_encoder_layers >= 1, "encoder_only needs at least one encoder layer")
            check(self.n_decoder_layers == 0, "encoder_only has no decoder: set n_decoder_layers to 0")
            check(self.sep_id < 0, "sep_id is for decoder-only and prefix-LM translators")
        else:
            check(self.n_decoder_layers >= 1, "need at least one decoder layer")
        if self.is_encoder_decoder:
            check(self.n_encoder_layers >= 1, "encoder_decoder needs at least one encoder layer")
        elif not self.is_encoder_only:
            check(self.n_encoder_layers == 0, f"{self.architecture} has no encoder: set n_encoder_layers to 0")
        check(0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)")
        check(self.max_len >= 2, "max_len must be at least 2")
        check(-1 <= self.sep_id < self.vocab_size, f"sep_id must be -1 (none) or a vocabulary id, not {self.sep_id}")
        check(self.sep_id < 0 or not self.is_encoder_decoder, "sep_id is for decoder-only and prefix-LM translators")
        # -- size limits: config.json is read from disk; refuse absurd sizes before anything is allocated
        for name, top in LIMITS.items():
            check(getattr(self, name) <= top, f"{name} {getattr(self, name):,} is above the limit {top:,}")
        # -- end of size limits

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        if not isinstance(d, dict):
            raise ValueError("config must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        tuples = {f.name for f in dataclasses.fields(cls) if isinstance(f.default, tuple)}
        return cls(**{k: tuple(v) if k in tuples and isinstance(v, list) else v for k, v in d.items()})
