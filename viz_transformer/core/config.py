"""Model configuration: one dataclass that fully describes an architecture.

Saved as `config.json` inside every checkpoint folder; `ModelConfig.from_dict` validates it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

ARCHITECTURES = ("encoder_decoder", "decoder_only", "prefix_lm")
POSITIONALS = ("sinusoidal", "learned")
NORMS = ("pre", "post")
ACTIVATIONS = ("relu", "gelu")
LIMITS = {"vocab_size": 1 << 18, "d_model": 8192, "n_heads": 256, "n_encoder_layers": 128,   # far above any
          "n_decoder_layers": 128, "d_ff": 65536, "max_len": 1 << 16}                   # model this app can show


@dataclass
class ModelConfig:
    vocab_size: int = 8000            # shared SentencePiece vocabulary (source and target)
    d_model: int = 256
    n_heads: int = 8
    n_encoder_layers: int = 3         # ignored (must be 0) unless architecture == encoder_decoder
    n_decoder_layers: int = 3
    d_ff: int = 1024
    activation: str = "relu"          # relu | gelu
    dropout: float = 0.1
    max_len: int = 512                # longest sequence the positional encoding covers
    positional: str = "sinusoidal"    # sinusoidal | learned
    norm: str = "pre"                 # pre: x + f(LN(x)); post: LN(x + f(x))
    tie_embeddings: bool = True       # source, target and output share one matrix
    architecture: str = "encoder_decoder"  # encoder_decoder | decoder_only | prefix_lm
    pad_id: int = 0
    bos_id: int = 2
    eos_id: int = 3
    sep_id: int = -1                  # [sep] of a decoder-only/prefix-LM translator: [begin] src [sep] tgt [end]; -1: an LM

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def is_encoder_decoder(self) -> bool:
        return self.architecture == "encoder_decoder"

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
        check(self.d_model > 0 and self.n_heads > 0, "d_model and n_heads must be positive")
        check(self.d_model % self.n_heads == 0,
              f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        check(self.vocab_size > max(self.pad_id, self.bos_id, self.eos_id), "vocab_size too small for special ids")
        check(self.n_decoder_layers >= 1, "need at least one decoder layer")
        if self.is_encoder_decoder:
            check(self.n_encoder_layers >= 1, "encoder_decoder needs at least one encoder layer")
        else:
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
        return cls(**d)
