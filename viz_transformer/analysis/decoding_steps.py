"""A decoding trace read step by step: the decoder's tokens after n steps, each step's keys, query and
label, and the beams of a beam search linked to their parents."""
from __future__ import annotations

from typing import Optional

from viz_transformer.analysis.piece_labels import ARROW


def sequence_text(trace, n: int, sep: str = " ‖ ") -> str:
    """The decoder tokens after n steps as one line: prompt, a separator, then the chosen pieces."""
    return " ".join(trace.prompt_pieces) + sep + " ".join(s.piece for s in trace.steps[:n])


def step_keys(trace, t: int) -> list[str]:
    """Self-attention keys of step t: the prompt then the pieces chosen before t."""
    return trace.prompt_pieces + [s.piece for s in trace.steps[:t]]


def step_query(trace, t: int) -> str:
    """The decoder input whose query row produced step t (the newest token at that time)."""
    return step_keys(trace, t)[-1]


def step_label(trace, t: int) -> str:
    """Step t's query row as "input → the token chosen there" (query_labels' form)."""
    return f"{step_query(trace, t)}{ARROW}{trace.steps[t].piece}"


def beam_links(trace, upto: Optional[int] = None) -> list[list[dict]]:
    """Per step, per beam: {"pieces", "score", "finished", "parent" (index in the previous step's
    list, -1 at step 0), "survives" (extended at the next step), "best" (a prefix of the chosen
    output)}. Parents are found by token prefix, which does not depend on how Beam.parent
    counts finished beams."""
    steps = [s.beams or [] for s in trace.steps][:upto]
    chosen = trace.output_ids
    out: list[list[dict]] = []
    for t, beams in enumerate(steps):
        row = []
        for b in beams:
            parent = -1
            if t > 0:
                for j, prev in enumerate(out[t - 1]):
                    if not prev["finished"] and prev["tokens"] == b.tokens[:-1]:
                        parent = j
                        break
            row.append({"tokens": b.tokens, "pieces": b.pieces, "score": b.score, "finished": b.finished,
                        "parent": parent, "survives": False, "best": b.tokens == chosen[: len(b.tokens)]})
        out.append(row)
    for t in range(1, len(out)):
        for b in out[t]:
            if b["parent"] >= 0:
                out[t - 1][b["parent"]]["survives"] = True
    return out
