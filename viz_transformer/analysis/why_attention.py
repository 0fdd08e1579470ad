"""What the "Why this attention" page says about one cell, from score_terms and logit_terms: the terms summed by
where their parts come from, the cell's runner-up key, what makes the winner win, and which heads write an output
word. Group names are score_terms.part_group's ("word", "position", "segment", "context" or "layer l", "bias");
the page translates them.

    t = score_terms(hm, run, "decoder.cross_attn", 1, 6, query=1, key=0)
    g = group_terms(t)                       # 4 × 4 at most: word, position, context, bias on each side
    s = story(t)                             # the largest group term, what position adds
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from viz_transformer.analysis.score_terms import LogitTerms, Terms, part_group

EXTRA = "relative position"          # Terms.extra's name for T5's bias, a group of its own in a gap


def _order(groups) -> list[str]:
    """Groups in the stream's order: word, position, segment, then the layers (or context), bias last."""
    def rank(g: str):
        if g.startswith("layer "):
            return (3, int(g.split()[1]))
        return ({"word": 0, "position": 1, "segment": 2, "context": 3, "bias": 9}[g], 0)
    return sorted(set(groups), key=rank)


@dataclass
class GroupedTerms:
    query_groups: list[str]
    key_groups: list[str]
    matrix: torch.Tensor           # [query groups, key groups] float64: the sum of the terms of those parts
    extra: dict                    # Terms.extra
    score: float

    def total(self) -> float:
        return float(self.matrix.sum()) + sum(self.extra.values())


def group_terms(terms: Terms, by_layer: bool = False) -> GroupedTerms:
    """terms' matrix summed over the parts of each group, on both axes (part_group; by_layer: a row per layer)."""
    qg = [part_group(p, by_layer) for p in terms.query_parts]
    kg = [part_group(p, by_layer) for p in terms.key_parts]
    rows, cols = _order(qg), _order(kg)
    Q = torch.zeros(len(rows), len(qg), dtype=torch.float64)
    K = torch.zeros(len(kg), len(cols), dtype=torch.float64)
    Q[[rows.index(g) for g in qg], range(len(qg))] = 1
    K[range(len(kg)), [cols.index(g) for g in kg]] = 1
    return GroupedTerms(rows, cols, Q @ terms.matrix @ K, dict(terms.extra), terms.score)


@dataclass
class Story:
    score: float
    query_group: str               # the largest term (in size) of the grouped matrix: its query group ...
    key_group: str                 # ... and key group
    value: float
    share: float                   # its size over the sum of every grouped term's size (extra included)
    position: float                # the terms with a position on either side, summed once each
    extra: float                   # T5's relative position bias (0 elsewhere)


def story(terms: Terms) -> Story:
    """The one-sentence reading of a score: its largest group term, and what the positions add."""
    g = group_terms(terms)
    flat = g.matrix.abs().flatten()
    i, j = divmod(int(flat.argmax()), len(g.key_groups))
    size = float(flat.sum()) + sum(abs(v) for v in g.extra.values())
    pos = torch.tensor([[q == "position" or k == "position" for k in g.key_groups] for q in g.query_groups])
    return Story(terms.score, g.query_groups[i], g.key_groups[j], float(g.matrix[i, j]),
                 float(flat[i * len(g.key_groups) + j]) / size if size else 0.0,
                 float(g.matrix[pos].sum()), sum(g.extra.values()))


def runner_up(weights: torch.Tensor, key: int) -> int:
    """The key a cell's is compared with: the row's highest-weighted other key when `key` is the row's top, else the
    top. weights: the row's attention weights (masked keys 0). -1 when the row has no other key it can see."""
    w = weights.double().clone()
    top = int(w.argmax())
    if top != key:
        return top
    w[key] = -1.0
    other = int(w.argmax())
    return other if weights[other] > 0 else -1


def key_group_values(terms: Terms) -> dict[str, float]:
    """The score summed by the key's part groups (Terms.key_groups, in the stream's order), T5's bias as EXTRA: the
    values add up to the score."""
    groups = terms.key_groups()
    out = {g: groups[g] for g in _order(groups)}
    if terms.extra:
        out[EXTRA] = sum(terms.extra.values())
    return out


def key_group_gap(winner: Terms, other: Terms) -> dict[str, float]:
    """What makes one key's score higher than another's in the same row: the difference of their key group values
    (the query is the same, so the gap is in the keys). The values add up to the scores' gap."""
    a, b = key_group_values(winner), key_group_values(other)
    return {g: a.get(g, 0.0) - b.get(g, 0.0) for g in dict.fromkeys(list(a) + list(b))}


def rivals(logits: torch.Tensor, token: int, k: int = 5) -> list[int]:
    """The k tokens with the highest logits in a row but `token`: what "why this word and not that one" compares."""
    top = torch.topk(logits.float(), min(k + 1, logits.shape[-1])).indices.tolist()
    return [i for i in top if i != token][:k]


_HEAD = re.compile(r"^(?:dec\.)?L(\d+)\.([HX])(\d+)$")


@dataclass
class HeadGrid:
    rows: list[tuple[int, str]]    # (layer, "self" | "cross") for each row of values
    values: torch.Tensor           # [rows, heads] float64: each head's direct contribution to the logit
    others: dict                   # the parts that are no head (word, position, each MLP, bias): name -> value


def head_grid(lt: LogitTerms, n_heads: int) -> HeadGrid:
    """logit_terms laid out as a layer × head grid (a row for each layer's self-attention, and for its
    cross-attention in an encoder-decoder), the other parts beside it."""
    cells, others = {}, {}
    for part, v in lt.by_part().items():
        m = _HEAD.match(part)
        if m:
            cells[(int(m[1]), "self" if m[2] == "H" else "cross", int(m[3]))] = v
        else:
            others[part] = v
    rows = sorted({(l, k) for l, k, _ in cells}, key=lambda r: (r[0], r[1] != "self"))
    values = torch.tensor([[cells.get((l, k, h), 0.0) for h in range(n_heads)] for l, k in rows], dtype=torch.float64)
    return HeadGrid(rows, values.reshape(len(rows), n_heads), others)
