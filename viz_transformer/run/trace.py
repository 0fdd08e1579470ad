"""What a step-by-step decode records (run.decoding.decode): every step's chosen piece, its top candidates and the
new query's attention rows, and for beam search every beam after every step. Plain data: the plots and the
app read it, nothing here runs a model."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass
class Candidate:
    id: int
    piece: str
    prob: float


@dataclass
class Beam:
    tokens: list[int]        # generated ids so far (without [begin])
    pieces: list[str]
    score: float             # sum of log-probabilities
    parent: int              # index of the beam it extends in the previous step's list (-1 at start)
    finished: bool = False   # ended with [end] at this step


@dataclass
class Step:
    index: int
    token_id: int
    piece: str
    prob: float                          # probability of the chosen token under the shown distribution
    candidates: list[Candidate]          # top-k of that distribution, most likely first
    attention: dict[str, torch.Tensor]   # hook name -> [head, key_pos]: the new query's row
    beams: Optional[list[Beam]] = None   # beam search: every beam after this step


@dataclass
class Trace:
    strategy: str
    src_pieces: Optional[list[str]]      # encoder input (translator) or None
    prompt_pieces: list[str]             # decoder input before the first step: [begin] (+ text for an LM)
    steps: list[Step] = field(default_factory=list)
    n_cut: int = 0                       # pieces of the text dropped to fit max_len ...
    cut_at: str = "end"                  # ... at its "end" (translator) or its "start" (LM), encoding.ModelInput
    beam_history: Optional[list[list[Beam]]] = None   # beam search: the beams after every step,
                                                      # also the steps after the best one ended
    src_ids: Optional[list[int]] = None  # ids of src_pieces
    prompt_ids: list[int] = field(default_factory=list)   # ids of prompt_pieces
    eos_id: Optional[int] = None
    stop_ids: tuple = ()                 # other ids that ended the generation as [end] does

    @property
    def output_ids(self) -> list[int]:
        """Every chosen id, including a final [end]."""
        return [s.token_id for s in self.steps]

    @property
    def generated_ids(self) -> list[int]:
        """The output without a final [end]: what a captured run teacher-forces."""
        ids = self.output_ids
        return ids[:-1] if ids and (ids[-1] == self.eos_id or ids[-1] in self.stop_ids) else ids

    @property
    def pieces(self) -> list[str]:
        """Decoder tokens: the prompt then every chosen piece (including a final [end])."""
        return self.prompt_pieces + [s.piece for s in self.steps]

    def pattern(self, name: str) -> torch.Tensor:
        """Stack the per-step rows of `name` into [head, step, key], zero-padded on the right."""
        rows = [s.attention[name] for s in self.steps]
        K = max(r.shape[-1] for r in rows)
        out = torch.zeros(rows[0].shape[0], len(rows), K)
        for i, r in enumerate(rows):
            out[:, i, : r.shape[-1]] = r
        return out
