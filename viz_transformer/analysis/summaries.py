"""Summaries of attention across heads, layers and sentences: rollout, source attribution, head statistics.

Torch/pandas maths on captures, no streamlit, no plotly. One function runs the model: corpus_head_stats, which
runs a corpus through run.capture.run_padded (batched) and then applies the same maths. The definitions (also on
the app's pages):

    rollout        Â_l = ½·mean_heads(A_l) + ½·I, rows renormalised; R = Â_L ⋯ Â_1   (Abnar & Zuidema 2020)
    attribution    mean_heads(last decoder layer's cross-attention) · R_encoder       [target, source]
    head stats     per head, averaged over the query rows that are not padding (STATS below)
"""
from __future__ import annotations

import unicodedata
from typing import Callable, Optional, Sequence

import pandas as pd
import torch

from viz_transformer.core.encoding import encode_input
from viz_transformer.run.capture import run_padded
from viz_transformer.run.decode_capture import decode_with_patterns
from viz_transformer.run.in_threads import map_in_threads

from viz_transformer.analysis import head_sums, sinks
from viz_transformer.core.hook_names import BLOCKS, available_blocks, hook_name, layer_name, n_layers
from viz_transformer.core.masks import causal_mask, prefix_lm_mask

# column -> what it is, per query row q, then averaged over rows (the app shows these words)
STATS = {"entropy": "−Σ_k p·ln p (nats): 0 = one key, ln n = spread evenly over n keys",
         "mean_distance": "Σ_k p_qk·|q − k| (cross-attention: q = target position, k = source position)",
         "self": "p_qq, the weight on the query's own position (self-attention only)",
         "prev_token": "p_q,q−1, the weight on the previous position, over q ≥ 1 (self-attention only)",
         "first_token": "p_q0, the weight on the first key",
         "last_token": "the weight on the last key the row may attend to (the source's [end]; in causal "
                       "attention that is the query itself, so it equals self)",
         "punctuation": "the total weight on punctuation pieces",
         "max_weight": "max_k p_qk, the heaviest key",
         "max_entropy": "ln(allowed keys): the entropy a row spread evenly would have (reference for entropy)"}
ROLE_THRESHOLD = 0.5     # a role's statistic must carry at least half of the weight on average
BROAD_FRACTION = 0.8     # "broad": entropy at least this fraction of max_entropy


# -- rollout and attribution ---------------------------------------------------------------------------
def rollout_from(patterns, residual: float = 0.5) -> torch.Tensor:
    """[layer, head, q, q] patterns (layer 0 first), or one [head, q, q] per layer read one at a time (a long
    text's layers never held together) -> [q, q] rollout Â_L ⋯ Â_1 with
    Â_l = (1 − residual)·mean_heads(A_l) + residual·I, each row renormalised to sum 1."""
    if isinstance(patterns, torch.Tensor) and patterns.dim() != 4:
        raise ValueError(f"rollout needs square [layer, head, q, q] patterns, got {tuple(patterns.shape)}")
    out = eye = None
    for layer in patterns:
        if layer.dim() != 3 or layer.shape[-1] != layer.shape[-2]:
            raise ValueError(f"rollout needs square [head, q, q] patterns per layer, got {tuple(layer.shape)}")
        if eye is None:
            out = eye = torch.eye(layer.shape[-1], dtype=torch.float64)
        a = (1 - residual) * layer.double().mean(0) + residual * eye              # (q, q)
        a = a / a.sum(-1, keepdim=True)
        out = a @ out                                                             # later layers on the left
    if out is None:
        raise ValueError("rollout needs at least one layer")
    return out.float()


def rollout(cache, part: str = "encoder", batch: int = 0) -> torch.Tensor:
    """Attention rollout of a part's self-attention ("encoder" or "decoder"), [query, key]."""
    if part not in ("encoder", "decoder"):
        raise ValueError(f"part must be 'encoder' or 'decoder', not {part!r}")
    if not cache.n_layers.get(part):
        raise KeyError(f"this model has no {part!r} layers")
    return rollout_from(cache[layer_name(part, i, "self_attn.hook_pattern")][batch]
                        for i in range(cache.n_layers[part]))


def source_attribution(cache, batch: int = 0) -> torch.Tensor:
    """A translator's target tokens over its source pieces: mean over heads of the last decoder
    layer's cross-attention [target, source], times the encoder rollout [source, source]. Rows sum to 1."""
    if not cache.n_layers.get("encoder"):
        raise ValueError("source attribution needs an encoder-decoder model: this one keeps source and target "
                         "in one sequence, so use rollout(cache, 'decoder') instead")
    last = cache.n_layers["decoder"] - 1
    cross = cache[hook_name("decoder.cross_attn", last, "hook_pattern")][batch].double().mean(0)   # (T, S)
    return (cross @ rollout(cache, "encoder", batch).double()).float()


# -- head statistics ----------------------------------------------------------------------------------
def is_punctuation(piece: str) -> bool:
    """A piece made only of punctuation (Unicode category P*), its word-start mark ▁ aside."""
    s = piece.replace("\u2581", "")
    return bool(s) and all(unicodedata.category(c).startswith("P") for c in s)


def pattern_stats(pattern: torch.Tensor, allowed: torch.Tensor, q_valid: torch.Tensor, key_punct: torch.Tensor,
                  same_sequence: bool = True) -> dict[str, torch.Tensor]:
    """Every statistic of STATS for a batch of one layer's patterns, per sentence and head.

    pattern [B, H, Q, K]; allowed bool [B, 1 or H, Q, K] (the captured hook_mask); q_valid bool [B, Q]
    (False for padding queries, whose rows are left out); key_punct bool [B, K]. same_sequence:
    queries and keys are the same positions (self-attention), else self/prev_token are NaN.
    Returns stat -> [B, H], each the mean over the valid query rows of that sentence."""
    p = pattern.double()
    B, H, Q, K = p.shape
    rows = q_valid.double()[:, None, :].expand(B, H, Q)                            # (B, H, Q)

    def mean_rows(x: torch.Tensor, w: torch.Tensor = rows) -> torch.Tensor:
        return (x * w).sum(-1) / w.sum(-1)

    qpos = torch.arange(Q, dtype=torch.float64)[:, None]
    kpos = torch.arange(K, dtype=torch.float64)[None, :]
    plogp = torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p))
    # on the mask as captured, [B, 1 or H, Q, K], then widened: one head's work, not H (a 512-piece text: 16 MB)
    last_key = (allowed.long() * torch.arange(1, K + 1)).argmax(-1, keepdim=True).expand(B, H, Q, 1)
    out = {"entropy": mean_rows(-plogp.sum(-1)),
           "mean_distance": mean_rows((p * (qpos - kpos).abs()).sum(-1)),
           "first_token": mean_rows(p[..., 0]),
           "last_token": mean_rows(p.gather(-1, last_key).squeeze(-1)),
           "punctuation": mean_rows((p * key_punct.double()[:, None, None, :]).sum(-1)),
           "max_weight": mean_rows(p.max(-1).values),
           "max_entropy": mean_rows(allowed.sum(-1).clamp_min(1).double().log().expand(B, H, Q))}
    nan = torch.full((B, H), float("nan"), dtype=torch.float64)
    if same_sequence and Q == K:
        out["self"] = mean_rows(torch.diagonal(p, dim1=-2, dim2=-1))
        out["prev_token"] = mean_rows(torch.diagonal(p, offset=-1, dim1=-2, dim2=-1), rows[..., 1:]) if Q > 1 else nan
    else:
        out["self"], out["prev_token"] = nan, nan.clone()
    return {k: out[k] for k in STATS}


def _batch_stats(cache, cfg, q_valid: dict[str, torch.Tensor], punct: dict[str, torch.Tensor]) -> list[dict]:
    """Rows (block, layer, head, stat -> [B] tensor) for every head of a captured batch."""
    rows = []
    for block in available_blocks(cfg):
        part, attn = BLOCKS[block]
        qpart, kpart = part, ("encoder" if attn == "cross_attn" else part)
        for layer in range(n_layers(cfg, block)):
            s = pattern_stats(cache[hook_name(block, layer, "hook_pattern")], cache[hook_name(block, layer, "hook_mask")],
                              q_valid[qpart], punct[kpart], same_sequence=attn == "self_attn")
            for h in range(cfg.n_heads):
                rows.append({"block": block, "layer": layer, "head": h, **{k: v[:, h] for k, v in s.items()}})
    return rows


def _table(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["block", "layer", "head", *STATS])
    return df.astype({k: "float64" for k in STATS})


def head_stats(run) -> pd.DataFrame:
    """One row per head of every attention block of a captured Run (batch 0): block, layer, head and STATS,
    each the mean over the query rows (pattern_stats' maths, read a block of rows at a time: head_sums)."""
    return head_tables(run, with_sinks=False)[0]


def head_tables(run, with_sinks: bool = True, workers: int = 1) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """head_stats(run) and, per attention block, sinks.sink_shares of the run ({block: table}; empty without
    with_sinks), from one read of each layer's pattern (the Head statistics page shows both). workers > 1 reads
    that many layers at once, each on a thread of its own (torch runs each one's operations on its calling
    thread, without the GIL): the same tables, sooner where cores are free."""
    cfg_like = _CacheCfg(run)
    punct = {"decoder": torch.tensor([is_punctuation(p) for p in run.tgt_pieces], dtype=torch.bool)}
    if run.src_pieces is not None:
        punct["encoder"] = torch.tensor([is_punctuation(p) for p in run.src_pieces], dtype=torch.bool)
    layers = [(block, layer) for block in available_blocks(cfg_like) for layer in range(n_layers(cfg_like, block))]

    def sums(job: tuple[str, int]) -> head_sums.LayerSums:
        block, layer = job
        part, attn = BLOCKS[block]
        kpart = "encoder" if attn == "cross_attn" else part
        return head_sums.layer_sums(run.cache, block, layer, punct[kpart], attn == "self_attn", sinks=with_sinks)
    found = list(map_in_threads(sums, layers, workers))
    rows, shares = [], {}
    for (block, layer), s in zip(layers, found):
        rows += _stat_rows(block, layer, s)
        if with_sinks:
            shares.setdefault(block, []).extend(sinks.share_rows(block, layer, s))
    return _table(rows), {b: pd.DataFrame(r, columns=sinks.COLUMNS) for b, r in shares.items()}


def _stat_rows(block: str, layer: int, s: head_sums.LayerSums) -> list[dict]:
    """One row per head: each statistic's sum over rows over the rows it counts (NaN where it has none)."""
    Q = s.n_rows
    means = {k: (s.stats[k] / (Q - 1 if k == "prev_token" else Q)) if k in s.stats and (k != "prev_token" or Q > 1)
             else None for k in STATS}
    return [{"block": block, "layer": layer, "head": h,
             **{k: float("nan") if v is None else float(v[h]) for k, v in means.items()}}
            for h in range(len(s.stats["entropy"]))]


class _CacheCfg:
    """What available_blocks/n_layers need, read from a run's cache (so a Run alone is enough)."""

    def __init__(self, run):
        n = run.cache.n_layers
        self.is_encoder_decoder = bool(n.get("encoder")) and bool(n.get("decoder"))
        self.architecture = "encoder_only" if not n.get("decoder") else None    # BERT: one block kind, the encoder's
        self.n_encoder_layers, self.n_decoder_layers = n.get("encoder", 0), n.get("decoder", 0)


CORPUS_BATCH = 64      # sentences per batch: decoding's matrices grow with it; past 64 the longest row holds more back


@torch.no_grad()
def corpus_head_stats(hm, texts: Sequence[str], progress: Optional[Callable[[int, int], None]] = None,
                      batch_size: int = CORPUS_BATCH, max_new_tokens: Optional[int] = None,
                      workers: int = 1) -> pd.DataFrame:
    """head_stats averaged per head over sentences (each sentence's mean over its valid rows, then the
    mean over sentences), plus `n_sentences`. A translator's decoder reads its own greedy output (as in
    HookedModel.run); a decoder-only model reads the text alone. Sentences run right-padded in batches;
    padding rows are left out. progress(done, total) is called after every batch. workers: batches at once, each on
    a thread of this process (run/in_threads.py): the same sums, added in the same order."""
    cfg, tok = hm.cfg, hm.tokenizer
    texts = [s for s in (str(x).strip() for x in texts) if s]
    if not texts:
        raise ValueError("the corpus has no sentences: give at least one non-empty line")
    def sums_of(chunk: list[str]) -> list[tuple[int, list[dict]]]:
        out = []
        for batch, cache in _captured_batches(hm, chunk, batch_size, max_new_tokens):
            seqs = {} if cfg.is_encoder_only else {"decoder": (batch.dec, batch.dec_len)}  # BERT: no decoder rows
            if batch.src is not None:
                seqs["encoder"] = (batch.src, batch.src_len)
            q_valid, punct = {}, {}
            for part, (rows, lens) in seqs.items():
                q_valid[part] = torch.arange(rows.shape[1])[None, :] < torch.tensor(lens)[:, None]
                ids, where = torch.unique(rows, return_inverse=True)             # each id's piece looked at once
                punct[part] = torch.tensor([is_punctuation(tok.piece(i)) for i in ids.tolist()])[where] & q_valid[part]
            out.append((len(batch), [{"key": (r["block"], r["layer"], r["head"]),
                                      **{k: float(r[k].sum()) for k in STATS}}
                                     for r in _batch_stats(cache, cfg, q_valid, punct)]))
        return out
    sums: dict[tuple, dict[str, float]] = {}
    done = 0
    for found in map_in_threads(sums_of, _batches(hm, texts, batch_size), workers):
        for size, rows in found:                  # added in the batches' order, whatever the threads
            for r in rows:
                acc = sums.setdefault(r["key"], {k: 0.0 for k in STATS})
                for k in STATS:
                    acc[k] += r[k]
            done += size
        if progress is not None:
            progress(done, len(texts))
    n = len(texts)
    df = _table([{"block": b, "layer": l, "head": h, **{k: v / n for k, v in acc.items()}}
                 for (b, l, h), acc in sums.items()])
    df["n_sentences"] = n
    return df


def _batches(hm, texts: list[str], batch_size: int) -> list[list[str]]:
    """The texts cut into batches: an encoder-decoder's sorted by source length first (decoding's rows then end
    close together; decode_with_patterns sorts the same way), any other's in their order."""
    if hm.cfg.is_encoder_decoder:
        texts = sorted(texts, key=lambda x: len(encode_input(hm.tokenizer, hm.cfg, x).src))
    return [texts[a:a + batch_size] for a in range(0, len(texts), batch_size)]


def _captured_batches(hm, texts: list[str], batch_size: int, max_new_tokens: Optional[int]):
    """(batch, patterns and masks) per batch: an encoder-decoder model's taken while it decodes (its decoder reads
    its own greedy output, and no second forward runs), any other's from one forward of its texts."""
    if hm.cfg.is_encoder_decoder:
        yield from decode_with_patterns(hm, texts, max_new_tokens, batch_size)
        return
    names = lambda n: n.endswith(("hook_pattern", "hook_mask"))                       # noqa: E731
    for start in range(0, len(texts), batch_size):
        yield run_padded(hm, texts[start:start + batch_size], max_new_tokens, names)


def head_roles(df: pd.DataFrame, threshold: float = ROLE_THRESHOLD, broad: float = BROAD_FRACTION) -> pd.DataFrame:
    """The table with `role` and its evidence added: the role whose statistic is clearly dominant
    (≥ threshold; the largest wins), "broad" when entropy ≥ broad·max_entropy, else "" (none clear).
    Evidence always names the number behind the label, as data and as English text:
    evidence_kind ("stat": a role's statistic; "broad": the entropy, of evidence_max possible; "none": the
    largest statistic, no role clear), evidence_stat (the STATS key), evidence_value, evidence_max (NaN
    unless broad), and `evidence`, the same in one line. An end sink needs last_token to differ from self
    (in causal attention the last allowed key is the query itself)."""
    roles, found_ev = [], []
    for r in df.itertuples(index=False):
        cands = {"previous-token": ("prev_token", r.prev_token), "first-token sink": ("first_token", r.first_token),
                 "self": ("self", r.self)}
        if not (r.self == r.self and abs(r.last_token - r.self) < 1e-9):     # NaN-safe: self is NaN in cross
            cands["end-token sink"] = ("last_token", r.last_token)
        found = {k: v for k, v in cands.items() if v[1] == v[1] and v[1] >= threshold}
        if found:
            role, (stat, v) = max(found.items(), key=lambda kv: kv[1][1])
            roles.append(role)
            found_ev.append(("stat", stat, v, float("nan")))
        elif r.max_entropy > 0 and r.entropy >= broad * r.max_entropy:
            roles.append("broad")
            found_ev.append(("broad", "entropy", r.entropy, r.max_entropy))
        else:
            stat, v = max(((s, v) for s, v in cands.values() if v == v), key=lambda sv: sv[1])
            roles.append("")
            found_ev.append(("none", stat, v, float("nan")))
    kinds, stats, values, maxes = (list(c) for c in zip(*found_ev)) if found_ev else ([], [], [], [])
    return df.assign(role=roles, evidence=[evidence_text(*e) for e in found_ev], evidence_kind=kinds,
                     evidence_stat=stats, evidence_value=[float(v) for v in values],
                     evidence_max=[float(m) for m in maxes])


def evidence_text(kind: str, stat: str, value: float, most: float = float("nan")) -> str:
    """A role's evidence in one English line: "prev_token = 0.93", "entropy = 2.10 of 2.30 possible",
    "none clear (largest: self = 0.41)"."""
    if kind == "broad":
        return f"entropy = {value:.2f} of {most:.2f} possible"
    if kind == "none":
        return f"none clear (largest: {stat} = {value:.2f})"
    return f"{stat} = {value:.2f}"


# -- roles as they form (training snapshots) -----------------------------------------------------------
def _snapshot_allowed(pattern: torch.Tensor, block: str, prefix_len: Optional[int]) -> torch.Tensor:
    """[1, 1, Q, K] keys a row could attend to in a snapshot (which stores patterns only): everything
    for encoder and cross-attention; causal for a decoder's self-attention, bidirectional inside the
    prefix of a prefix LM (its recorded prefix length; for snapshots recorded before it was stored,
    the rows that put weight above the diagonal)."""
    Q, K = pattern.shape[-2:]
    if block != "decoder.self_attn" or Q != K:
        return torch.ones(1, 1, Q, K, dtype=torch.bool)
    if prefix_len:
        return prefix_lm_mask(Q, int(prefix_len))
    return causal_mask(Q) | (pattern > 0).any(0)[None, None]


def snapshot_head_stats(snaps) -> pd.DataFrame:
    """head_stats at every recorded training step: each head's STATS from the snapshot's patterns of its
    fixed sentences (each sentence's mean over its rows, then the mean over sentences, as
    corpus_head_stats). One row per step, block, layer and head (step_index, step, block, layer, head, STATS)."""
    n_steps, n_texts = len(snaps.steps), len(snaps.texts)
    prefix = getattr(snaps, "prefix_len", None) or [None] * n_texts
    sums: dict[tuple, torch.Tensor] = {}                     # (block, layer) -> stat -> [steps, H]
    for j in range(n_texts):
        seqs = {"decoder": snaps.tgt_pieces[j], "encoder": snaps.src_pieces[j]}
        for name in snaps.names():
            part, layer, attn = name.split(".")[:3]
            block = f"{part}.{attn}"
            pats = torch.stack([snaps.pattern(i, j, name) for i in range(n_steps)])      # (S, H, Q, K)
            kp = seqs["encoder" if attn == "cross_attn" else part]
            s = pattern_stats(pats, _snapshot_allowed(pats[-1], block, prefix[j]),
                              torch.ones(n_steps, pats.shape[2], dtype=torch.bool),
                              torch.tensor([[is_punctuation(p) for p in kp]] * n_steps), same_sequence=attn == "self_attn")
            acc = sums.setdefault((block, int(layer)), {k: torch.zeros_like(v) for k, v in s.items()})
            for k in STATS:
                acc[k] += s[k] / n_texts
    rows = []
    for (block, layer), acc in sorted(sums.items(), key=lambda kv: (list(BLOCKS).index(kv[0][0]), kv[0][1])):
        for i, step in enumerate(snaps.steps):
            for h in range(acc["entropy"].shape[1]):
                rows.append({"step_index": i, "step": step, "block": block, "layer": layer, "head": h,
                             **{k: float(acc[k][i, h]) for k in STATS}})
    df = pd.DataFrame(rows, columns=["step_index", "step", "block", "layer", "head", *STATS])
    return df.astype({k: "float64" for k in STATS})


def roles_over_training(snaps, threshold: float = ROLE_THRESHOLD) -> pd.DataFrame:
    """Each head's role (head_roles) at every recorded step: columns step_index, step, block, layer, head,
    role, evidence_stat, evidence_value, evidence (the one-line text). A student sees when, for example, a
    previous-token head appears."""
    cols = ["step_index", "step", "block", "layer", "head", "role", "evidence_kind", "evidence_stat",
            "evidence_value", "evidence"]
    return head_roles(snapshot_head_stats(snaps), threshold)[cols]


def first_appearances(table: pd.DataFrame, block: str) -> list[dict]:
    """For each role in `block` (in order of appearance): the first recorded step at which some head has it
    and keeps it to the last step, that head and its evidence there. Heads that only flicker into a role
    do not count."""
    t = table[table.block == block]
    out = {}
    for (layer, head), g in t.groupby(["layer", "head"]):
        g = g.sort_values("step_index")
        role = g.role.iloc[-1]
        if not role:
            continue
        stable = g.role.eq(role)[::-1].cummin()[::-1]          # True from the step it takes the role for good
        first = g[stable].iloc[0]
        cand = {"role": role, "layer": int(layer), "head": int(head), "step": int(first.step),
                "step_index": int(first.step_index), "evidence": first.evidence,
                "final_evidence": g.evidence.iloc[-1]}
        if role not in out or (cand["step_index"], cand["layer"], cand["head"]) < (
                out[role]["step_index"], out[role]["layer"], out[role]["head"]):
            out[role] = cand
    return sorted(out.values(), key=lambda r: (r["step_index"], r["role"]))
