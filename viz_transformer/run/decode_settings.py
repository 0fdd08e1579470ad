"""How a trace generates: the strategy and its knobs as one value (decoding.decode, the CLI, the decoding page).

The model's own rules (an imported model's repetition_penalty, forced [end], bad words) stay on its config:
they belong to the model, not to one call.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Union

from viz_transformer.core.config import early_stopping_rule
from viz_transformer.core.encoding import MAX_BEAM, check_decoding

STRATEGIES = ("greedy", "sample", "beam")


@dataclass(frozen=True)
class DecodeSettings:
    strategy: str = "greedy"                   # greedy, sample or beam
    max_new_tokens: Optional[int] = None       # None: the config's (decoding.new_tokens)
    temperature: float = 1.0                   # sample only
    top_k: int = 0                             # sample only; 0 keeps every id
    top_p: float = 1.0                         # sample only; 1 keeps every id
    seed: int = 0                              # sample only
    beam_width: Optional[int] = None           # beam only; None: the config's num_beams (at most MAX_BEAM)
    length_penalty: Optional[float] = None     # beam only; None: the config's
    early_stopping: Union[bool, str, None] = None   # beam only; True, False or "never"; None: the config's
    n_candidates: int = 5                      # candidates recorded per step

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")

    def resolved(self, cfg, max_new_tokens: int) -> "DecodeSettings":
        """Every None filled from the model config (max_new_tokens: the caller's, which depends on the
        prompt), early_stopping as the config's string; ValueError naming the allowed range for a value
        out of range."""
        s = dataclasses.replace(
            self, max_new_tokens=max_new_tokens,
            beam_width=min(cfg.num_beams, MAX_BEAM) if self.beam_width is None else self.beam_width,  # a config's 32
            length_penalty=cfg.length_penalty if self.length_penalty is None else self.length_penalty,
            early_stopping=early_stopping_rule(cfg.early_stopping if self.early_stopping is None
                                               else self.early_stopping))
        check_decoding(cfg, cfg.out_vocab, s.max_new_tokens, s.temperature, s.top_k, s.top_p, s.beam_width,
                       s.length_penalty, s.n_candidates, s.seed)
        return s
