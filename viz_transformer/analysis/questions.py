"""Questions a lesson step asks ("predict, then reveal"): each kind computes its options, the answer and the
evidence from the model on the step's own text; no answer is ever typed into a lesson file.

    q = ask("argmax_key", hm, "我是一名工程师。", {"block": "encoder.self_attn", "layer": 0, "head": 0, "row": 1})
    q.options, q.options[q.answer], q.evidence         # key labels, the heaviest key, the row's weights

Options are stable ids (key labels "i:piece", candidate pieces, "yes"/"no", role names of
summaries.head_roles), the same in every interface language; the app translates yes/no and the roles.
"""
from __future__ import annotations

import inspect
import random
from dataclasses import dataclass
from typing import Callable, Optional

from viz_transformer.analysis import attribution, patterns, piece_labels, summaries
from viz_transformer.analysis.fact_core import shared_run       # one run per model and text
from viz_transformer.core.hook_names import available_blocks, block_prefix, n_layers
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input, default_new_tokens
from viz_transformer.run.trace import Candidate
from viz_transformer.run.interventions import MODES, head_ablation_hooks, head_means

YES, NO = "yes", "no"
NONE = "none"                       # head_roles' "" (no role clear)
ROLES = ("previous-token", "first-token sink", "self", "end-token sink", "broad", NONE)
ROLE_STATS = {"previous-token": "prev_token", "first-token sink": "first_token", "self": "self",
              "end-token sink": "last_token"}
N_CANDIDATES = 4                    # next_token: the answer among the model's top-4


@dataclass
class Question:
    kind: str
    options: list[str]              # what the student picks from (stable ids, unique)
    answer: int                     # index of the model's answer in options
    evidence: dict                  # what the reveal highlights: plain numbers and labels, per kind


KINDS: dict[str, Callable[..., Question]] = {}


def kind(fn):
    KINDS[fn.__name__] = fn
    return fn


def params(name: str) -> tuple[str, ...]:
    """The arguments a kind takes besides (hm, text): what a lesson's question may set."""
    return tuple(list(inspect.signature(KINDS[name]).parameters)[2:])


def ask(name: str, hm, text: str, args: Optional[dict] = None) -> Question:
    """The question `name` (a kind in KINDS) for checkpoint hm on text. ValueError for an unknown kind, an
    argument the kind does not take, or a block, layer, head or row the model does not have."""
    if name not in KINDS:
        raise ValueError(f"unknown question kind {name!r}; known: {', '.join(KINDS)}")
    extra = set(args or {}) - set(params(name))
    if extra:
        raise ValueError(f"question {name!r} takes {', '.join(params(name))}, not {', '.join(sorted(extra))}")
    return KINDS[name](hm, text, **(args or {}))


def _head(hm, block: Optional[str], layer: int, head: int) -> str:
    """The block (default: the model's first), checked with layer and head against the model."""
    blocks = available_blocks(hm.cfg)
    block = block or blocks[0]
    if block not in blocks:
        raise ValueError(f"this model has no {block} blocks, only {', '.join(blocks)}")
    if not 0 <= layer < n_layers(hm.cfg, block):
        raise ValueError(f"layer {layer} is out of range: {block} layers are 0 … {n_layers(hm.cfg, block) - 1}")
    if not 0 <= head < hm.cfg.n_heads:
        raise ValueError(f"head {head} is out of range: heads are 0 … {hm.cfg.n_heads - 1}")
    return block


def key_labels(pieces: list[str]) -> list[str]:
    """"i:piece" per key: repeated pieces stay distinct (the figures' own axis labels, unescaped)."""
    return [f"{i}:{p}" for i, p in enumerate(pieces)]


def shuffled(options: list[str], seed: str) -> list[str]:
    """The options in an order fixed by `seed` (the same for every student and rerun), not by rank."""
    out = list(options)
    random.Random(seed).shuffle(out)
    return out


@kind
def argmax_key(hm, text: str, block: Optional[str] = None, layer: int = 0, head: int = 0, row: int = 0) -> Question:
    """Which key gets the most weight from query `row` in this head: the options are the keys the row may
    attend to, the answer the argmax of its pattern row."""
    block = _head(hm, block, layer, head)
    run = shared_run(hm, text)
    q_pieces, k_pieces = piece_labels.block_pieces(run, block)
    if not 0 <= row < len(q_pieces):
        raise ValueError(f"row {row} is out of range: this text has rows 0 … {len(q_pieces) - 1} in {block}")
    w = patterns.head_pattern(run.cache, block, layer, head)[row]                # (K,)
    allowed = run.cache[patterns.hook_name(block, layer, "hook_mask")][0, 0, row].bool()
    keys = [i for i in range(len(k_pieces)) if bool(allowed[i])]
    best = max(keys, key=lambda i: float(w[i]))
    labels = key_labels(k_pieces)
    return Question("argmax_key", [labels[i] for i in keys], keys.index(best),
                    {"weights": [float(x) for x in w], "keys": list(k_pieces), "allowed": [bool(a) for a in allowed],
                     "best": best, "query": piece_labels.query_labels(run, block)[row], "row": row, "block": block,
                     "layer": layer, "head": head})


@kind
def next_token(hm, text: str, step: int = 1) -> Question:
    """Which piece greedy decoding picks at generation step `step` (1 = the first): the answer among the
    model's top N_CANDIDATES at that step, in a fixed shuffled order."""
    tr = shared_run(hm, text).trace
    if not 1 <= step <= len(tr.steps):
        raise ValueError(f"step {step} is out of range: greedy decoding of this text takes 1 … {len(tr.steps)} steps")
    s = tr.steps[step - 1]
    cands = s.candidates[:N_CANDIDATES]
    if all(c.id != s.token_id for c in cands):          # e.g. a forced [end]: the answer is always an option
        cands = cands[:N_CANDIDATES - 1] + [Candidate(s.token_id, s.piece, s.prob)]
    options = shuffled([c.piece for c in cands], f"{text}|{step}")
    return Question("next_token", options, options.index(s.piece),
                    {"pieces": [c.piece for c in cands], "probs": [c.prob for c in cands],
                     "chosen": next(i for i, c in enumerate(cands) if c.id == s.token_id),
                     "so_far": tr.pieces[:len(tr.prompt_pieces) + step - 1], "step": step})


@kind
def fill_blank(hm, text: str) -> Question:
    """Which piece a masked LM puts in the text's first [MASK]: the answer among its head's top N_CANDIDATES
    there, in a fixed shuffled order."""
    from viz_transformer.run.fill_mask import fill_blanks
    run = shared_run(hm, text)
    blanks = fill_blanks(hm, run, k=N_CANDIDATES)
    if not blanks:
        raise ValueError(f"fill_blank needs a text with {getattr(hm.tokenizer, 'mask_token', None) or '[MASK]'}")
    b = blanks[0]
    pieces = [p for p, _ in b.top]
    options = shuffled(pieces, f"{text}|blank")
    return Question("fill_blank", options, options.index(pieces[0]),
                    {"pieces": pieces, "probs": [float(x) for _, x in b.top], "chosen": 0,
                     "text": list(run.src_pieces), "position": b.position})


SOURCES = ("word", "position", "context", "bias")     # why_key's groups of the key's parts


@kind
def why_key(hm, text: str, block: Optional[str] = None, layer: int = 0, head: int = 0, row: int = 0) -> Question:
    """Why this head's row puts its most weight on its key: the score of that key split by score_terms and summed by
    the key's part groups (SOURCES); the answer is the group that adds the most."""
    from viz_transformer.analysis.score_terms import full_run, score_terms
    block = _head(hm, block, layer, head)
    run = full_run(hm, text)
    stack, site = block.split(".")
    pat = run.cache[f"{stack}.{layer}.{site}.hook_pattern"][0, head]
    if not 0 <= row < pat.shape[0]:
        raise ValueError(f"row {row} is out of range: this block has {pat.shape[0]} query rows")
    key = int(pat[row].argmax())
    t = score_terms(hm, run, block, layer, head, row, key)
    groups = {g: t.key_groups().get(g, 0.0) for g in SOURCES}
    answer = max(SOURCES, key=lambda g: groups[g])
    keys = run.src_pieces if site == "cross_attn" or stack == "encoder" else run.tgt_pieces
    return Question("why_key", list(SOURCES), SOURCES.index(answer),
                    {"groups": groups, "key": keys[key], "key_index": key, "query": piece_labels.query_labels(run, block)[row],
                     "score": t.score, "weight": float(pat[row, key]), "extra": sum(t.extra.values()),
                     "block": block, "layer": layer, "head": head, "row": row})


@kind
def residual_grows(hm, text: str) -> Question:
    """Whether the residual stream grows through the layers (claims_stack.residual_norms' rule: the last layer's mean
    length at least GROWS × the input's); the evidence is the length at the input and after every layer."""
    from viz_transformer.analysis.claims_stack import GROWS, residual_lengths
    n = residual_lengths(hm, text)
    grows = n[-1] / n[0] >= GROWS
    return Question("residual_grows", [YES, NO], 0 if grows else 1,
                    {"lengths": n, "ratio": n[-1] / n[0], "threshold": GROWS, "norm": hm.cfg.norm})


@kind
def knockout_changes(hm, text: str, block: Optional[str] = None, layer: int = 0, head: int = 0,
                     mode: str = "zero") -> Question:
    """Whether knocking this head out (interventions.head_ablation_hooks) changes the greedy output."""
    block = _head(hm, block, layer, head)
    if mode not in MODES:
        raise ValueError(f"unknown ablation mode {mode!r}; choose one of {', '.join(MODES)}")
    run = shared_run(hm, text)
    prefix = block_prefix(block, layer)
    means = head_means(hm, text) if mode == "mean" else None
    hooks = head_ablation_hooks([(prefix, head)], mode, means, cfg=hm.cfg)
    off = decode_input(hm.model, hm.tokenizer, run.input, DecodeSettings(max_new_tokens=default_new_tokens(hm.cfg)),
                       hooks=hooks)
    changed = off.generated_ids != list(run.output_ids)
    return Question("knockout_changes", [YES, NO], 0 if changed else 1,
                    {"with": hm.tokenizer.pieces(list(run.output_ids)),
                     "without": hm.tokenizer.pieces(off.generated_ids),
                     "output": run.output, "output_off": hm.tokenizer.decode(off.generated_ids),
                     "changed": changed, "block": block, "layer": layer, "head": head, "mode": mode})


@kind
def head_role(hm, text: str, block: Optional[str] = None, layer: int = 0, head: int = 0) -> Question:
    """Which simple role this head plays on this text (summaries.head_roles on summaries.head_stats): the
    options are the roles whose statistic this block has, plus broad and none."""
    block = _head(hm, block, layer, head)
    run = shared_run(hm, text)
    df = summaries.head_roles(summaries.head_stats(run))
    r = df[(df["block"] == block) & (df["layer"] == layer) & (df["head"] == head)].iloc[0]
    stats = {role: float(r[stat]) for role, stat in ROLE_STATS.items() if r[stat] == r[stat]}   # NaN: not here
    options = [role for role in ROLES if role in stats or role in ("broad", NONE)]
    answer = r["role"] or NONE
    return Question("head_role", options, options.index(answer),
                    {"stats": stats, "threshold": summaries.ROLE_THRESHOLD, "entropy": float(r["entropy"]),
                     "max_entropy": float(r["max_entropy"]), "broad": summaries.BROAD_FRACTION,
                     "evidence": r["evidence"], "role": answer, "block": block, "layer": layer, "head": head})


@kind
def top_piece(hm, text: str, step: int = 1) -> Question:
    """Which input piece matters most for the word the model writes at output step `step` (1 = the first): the
    answer is occlusion's (analysis.attribution: the largest drop in log p when a piece's embedding is zeroed);
    the evidence has the attention row (mean over heads and layers) beside it."""
    run = shared_run(hm, text)
    tgt = attribution.step_target(hm, run, step)
    occ = attribution.grads.occlusion(hm, tgt)
    att = attribution.attention_row(hm, tgt)
    best, looked = int(occ.argmax()), int(att.argmax())
    return Question("top_piece", key_labels(tgt.pieces), best,
                    {"pieces": list(tgt.pieces), "occlusion": [float(x) for x in occ],
                     "attention": [float(x) for x in att], "best": best, "attention_best": looked,
                     "word": hm.tokenizer.pieces([tgt.token])[0], "step": step})

