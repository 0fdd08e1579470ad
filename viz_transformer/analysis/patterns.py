"""What the app's pages compute from a capture, a trace or a positional table: pure torch/numpy.

No streamlit, no plotly: every function takes tensors/lists and returns tensors/arrays/dataclasses.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from viz_transformer.core.attention import AttentionSteps, attention
from viz_transformer.core.rope import cos_sin, rotate
from viz_transformer.core.masks import causal_mask, padding_mask, prefix_lm_mask
from viz_transformer.core.hook_names import BLOCKS, available_blocks, hook_name, n_layers  # noqa: F401  (the pages' names)
from viz_transformer.core.tokenizer import EOS, group_words, word_labels


def block_pieces(run, block: str) -> tuple[list[str], list[str]]:
    """(query pieces, key pieces) of a block: cross-attention queries the decoder, keys the source."""
    if block == "encoder.self_attn":
        return run.src_pieces, run.src_pieces
    if block == "decoder.cross_attn":
        return run.tgt_pieces, run.src_pieces
    return run.tgt_pieces, run.tgt_pieces


ARROW = " → "       # a decoder row's label: its input, then the token predicted there


def query_labels(run, block: str, words: bool = False) -> list[str]:
    """Labels of a block's query rows, for display. An encoder row is its piece. A decoder row (self- or
    cross-attention) is the step that predicts the next token: "▁an → ▁engineer" is the row whose input is ▁an
    and where the model predicts ▁engineer (run.predicted). words: one label per word (word_level's rows)."""
    q, _ = block_pieces(run, block)
    return row_labels(q, None if block == "encoder.self_attn" else run.predicted, words)


def row_labels(pieces: list[str], predicted: Optional[list[str]] = None, words: bool = False) -> list[str]:
    """"input → predicted" per row (the pieces alone when predicted is None). With words, a word's row says
    what its last piece predicts, the step at the end of the word."""
    groups = group_words(pieces) if words else [[i] for i in range(len(pieces))]
    names = word_labels(pieces, groups) if words else list(pieces)
    if predicted is None:
        return names
    return [f"{n}{ARROW}{predicted[g[-1]]}" for n, g in zip(names, groups)]


def next_pieces(pieces: list[str]) -> list[str]:
    """What each teacher-forced decoder row is trained to predict: the next piece, [end] after the last."""
    return list(pieces[1:]) + [EOS]


def example_row(pieces: list[str], predicted: list[str], start: int = 0) -> tuple[str, str]:
    """(row label, predicted piece) of one row from `start` on, for a page's intro: the one predicting the
    longest word ("▁an → ▁engineer")."""
    start = min(max(start, 0), len(pieces) - 1)
    i = max(range(start, len(pieces)), key=lambda r: (predicted[r].lstrip("\u2581").isalpha(), len(predicted[r]), -r))
    return f"{pieces[i]}{ARROW}{predicted[i]}", predicted[i]


def pieces_table(ids: list[int], pieces: list[str]) -> list[dict]:
    """One row per piece: position, piece, id, word index (tokenizer.group_words), starts a word."""
    word_of = {i: w for w, g in enumerate(group_words(pieces)) for i in g}
    return [{"pos": i, "piece": p, "id": int(ids[i]), "word": word_of[i], "starts": p.startswith("\u2581")}
            for i, p in enumerate(pieces)]


def training_summary(meta: dict) -> dict:
    """The facts of meta.json a reader cares about (what data, how long, how good)."""
    keep = ("task", "data", "trained_at", "train_items", "n_params", "train_seconds", "val", "test", "demo")
    return {k: meta[k] for k in keep if k in meta and meta[k] is not None}


def tokenizer_kind(tok) -> str:
    """What cuts a text into pieces: "sentencepiece" (this project's models, Marian), "byte_bpe" (GPT-2,
    Qwen), "bpe" (Llama, Mistral: BPE over characters), "wordpiece"; a tokenizer without `kind` is ours."""
    return getattr(tok, "kind", "sentencepiece")


def epoch_curve(meta: dict) -> list[tuple[int, float]]:
    """meta.json's training loss at the end of each epoch, [(step, train_loss), ...] (train.py records it in
    meta["curve"] with the validation scores); [] when none is recorded."""
    curve = meta.get("curve") if isinstance(meta.get("curve"), list) else []
    return [(h["step"], h["train_loss"]) for h in curve if isinstance(h, dict)
            and isinstance(h.get("step"), (int, float)) and isinstance(h.get("train_loss"), (int, float))]


def headline_metrics(summary: dict) -> dict[str, str]:
    """A few numbers worth a glance: test (else validation) BLEU/chrF or loss, and the epoch."""
    out = {}
    for split in ("test", "val"):
        d = summary.get(split)
        if isinstance(d, dict):
            for k in ("bleu", "chrf", "loss", "perplexity", "epoch"):
                if k in d and isinstance(d[k], (int, float)):
                    out[f"{split} {k}"] = f"{d[k]:g}"
            break
    return out


def training_metrics(meta: dict) -> dict[str, float]:
    """meta.json's numbers by a stable key (params, items, seconds, epoch, {test,val}_{bleu,chrf,perplexity,loss},
    train_loss): the page names them. The test split is preferred for scores; the epoch and training loss are
    the validation record's (the epoch that shipped)."""
    out: dict[str, float] = {}
    for k, key in (("params", "n_params"), ("items", "train_items"), ("seconds", "train_seconds")):
        if isinstance(meta.get(key), (int, float)):
            out[k] = meta[key]
    for split in ("test", "val"):
        d = meta.get(split)
        if isinstance(d, dict):
            for k in ("bleu", "chrf", "perplexity", "loss"):
                if isinstance(d.get(k), (int, float)) and not any(x.endswith("_" + k) for x in out):
                    out[f"{split}_{k}"] = d[k]
    val = meta.get("val") if isinstance(meta.get("val"), dict) else {}
    for k, key in (("epoch", "epoch"), ("train_loss", "train_loss")):
        if isinstance(val.get(key), (int, float)):
            out[k] = val[key]
    return out


def position_labels(pieces: list[str]) -> list[str]:
    """Unique labels "i:piece", so a repeated token stays a separate row/column."""
    return [f"{i}:{p}" for i, p in enumerate(pieces)]


# -- reducing attention -------------------------------------------------------------------------
def block_patterns(cache, block: str) -> torch.Tensor:
    """Every layer's pattern of a block: [layer, head, q, k]."""
    part, attn = BLOCKS[block]
    return cache.stack(f"{attn}.hook_pattern", part=part)


def reduce_heads(pattern: torch.Tensor, how: str = "mean") -> torch.Tensor:
    """[head, q, k] -> [q, k], mean or max over heads."""
    if how == "mean":
        return pattern.mean(0)
    if how == "max":
        return pattern.max(0).values
    raise ValueError(f"how must be 'mean' or 'max', not {how!r}")


def aggregate_words(pattern: torch.Tensor, q_groups: list[list[int]], k_groups: list[list[int]]) -> torch.Tensor:
    """[..., q, k] pieces -> [..., q_words, k_words]: keys of a word are summed (the attention a
    word receives is the total its pieces get), queries of a word are averaged (so rows still sum to 1)."""
    cols = torch.stack([pattern[..., g].sum(-1) for g in k_groups], -1)          # (..., q, kw)
    return torch.stack([cols[..., g, :].mean(-2) for g in q_groups], -2)        # (..., qw, kw)


def word_level(pattern: torch.Tensor, q_pieces: list[str], k_pieces: list[str]):
    """Word-level attention and its labels: (matrix [..., qw, kw], q_labels, k_labels)."""
    qg, kg = group_words(q_pieces), group_words(k_pieces)
    return aggregate_words(pattern, qg, kg), word_labels(q_pieces, qg), word_labels(k_pieces, kg)


def downsample(m, max_rows: int, max_cols: int, how: str = "max"):
    """Shrink a [R, C] matrix to at most [max_rows, max_cols] by pooling contiguous blocks.

    how: "max" keeps every block's maximum (sharp heads stay visible), "sum" keeps totals,
    "mean" keeps averages. Returns (pooled array, row_starts, col_starts): block i covers rows
    row_starts[i] .. row_starts[i+1]-1.
    """
    a = np.asarray(m, dtype=np.float64)
    R, C = a.shape
    rs = np.unique(np.linspace(0, R, min(R, max_rows) + 1).astype(int))[:-1]
    cs = np.unique(np.linspace(0, C, min(C, max_cols) + 1).astype(int))[:-1]
    if how == "max":
        out = np.maximum.reduceat(np.maximum.reduceat(a, rs, axis=0), cs, axis=1)
    elif how in ("sum", "mean"):
        out = np.add.reduceat(np.add.reduceat(a, rs, axis=0), cs, axis=1)
        if how == "mean":
            out = out / np.outer(np.diff(np.append(rs, R)), np.diff(np.append(cs, C)))
    else:
        raise ValueError(f"how must be 'max', 'sum' or 'mean', not {how!r}")
    return out, rs, cs


def model_view_tiles(patterns: torch.Tensor, max_size: int = 32) -> list[list[np.ndarray]]:
    """[layer, head, q, k] -> tiles[layer][head], each max-pooled to at most max_size × max_size."""
    return [[downsample(patterns[l, h], max_size, max_size, "max")[0] for h in range(patterns.shape[1])]
            for l in range(patterns.shape[0])]


def token_window(n: int, start: int, size: int) -> tuple[int, int]:
    """A [a, b) window of at most `size` positions starting near `start`, clipped to 0..n."""
    size = min(size, n)
    a = max(0, min(int(start), n - size))
    return a, a + size


def axis_windows(n_query: int, n_key: int, start: int, size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Windows of at most `size` positions for the query axis and the key axis, each starting near
    `start` and clipped to its own length: ((q_a, q_b), (k_a, k_b)), half-open. Cross-attention with
    20 queries and 60 keys keeps all 20 queries while the keys scroll."""
    return token_window(n_query, start, size), token_window(n_key, start, size)


def snap_divisor(value: float, d_head: int, tolerance: float = 0.03) -> float:
    """A slider value near √d_k is √d_k exactly (a slider cannot hold an irrational default)."""
    sqrt_dk = math.sqrt(d_head)
    return sqrt_dk if abs(value - sqrt_dk) < tolerance else float(value)


def head_matrix(layer_patterns: torch.Tensor, head, q_pieces: list[str], k_pieces: list[str],
                words: bool = False):
    """One matrix for the heatmap: a head (int) or "mean"/"max" over heads of [head, q, k], at
    piece or word level. Words are aggregated per head first, then reduced, so a max over heads
    stays a weight in [0, 1]. Returns (matrix [q, k], q_labels, k_labels)."""
    pats, ql, kl = layer_patterns, list(q_pieces), list(k_pieces)
    if words:
        pats, ql, kl = word_level(layer_patterns, q_pieces, k_pieces)             # (H, qw, kw)
    mat = pats[head] if isinstance(head, int) else reduce_heads(pats, head)
    return mat, ql, kl


def line_edges(pattern, min_weight: float = 0.0, max_lines: int = 300) -> list[tuple[int, int, float]]:
    """The strongest (query, key, weight) links of a [q, k] pattern, at most max_lines, heaviest first."""
    a = np.asarray(pattern, dtype=np.float64)
    qi, ki = np.nonzero(a >= max(min_weight, 1e-12))
    w = a[qi, ki]
    order = np.argsort(-w, kind="stable")[:max_lines]
    return [(int(qi[o]), int(ki[o]), float(w[o])) for o in order]


# -- one head, step by step ----------------------------------------------------------------------
HeadSteps = AttentionSteps      # one head's stages, from attention.attention


def head_qkv(cache, block: str, layer: int, head: int, batch: int = 0):
    """Captured (q [T, d], k [S, d], v [S, d], mask [T, S]) of one head, as its scores use them: q and k after
    the rotation (RoPE), k and v of the key/value head this query head reads (grouped-query attention)."""
    rot = hook_name(block, layer, "hook_rot_q") in cache
    q_all = cache[hook_name(block, layer, "hook_rot_q" if rot else "hook_q")]
    k_all = cache[hook_name(block, layer, "hook_rot_k" if rot else "hook_k")]
    kv_head = head // (q_all.shape[2] // k_all.shape[2])
    q, k = q_all[batch, :, head, :], k_all[batch, :, kv_head, :]
    v = cache[hook_name(block, layer, "hook_v")][batch, :, kv_head, :]
    mask = cache[hook_name(block, layer, "hook_mask")][batch, 0]
    return q, k, v, mask


def head_pattern(cache, block: str, layer: int, head: int, batch: int = 0) -> torch.Tensor:
    """One head's pattern [q, k]. A compact run (viz_transformer.run.derived_cache) recomputes a pattern on every read,
    every head of the layer: for one head only that head is recomputed, from its own q, k, v and mask."""
    name = hook_name(block, layer, "hook_pattern")
    if name in getattr(cache, "derived", {}):
        return attention_steps(*head_qkv(cache, block, layer, head, batch)).weights
    return cache[name][batch, head]


def attention_steps(q, k, v, mask=None, divisor: Optional[float] = None) -> AttentionSteps:
    """softmax((q kᵀ) / divisor + mask) v for one head with every stage kept; divisor defaults to
    √d_k. The model's own attention function, so at √d_k it reproduces the captured pattern."""
    return attention(q, k, v, mask, divisor)


def sdpa_reference(q, k, v, mask=None, divisor: Optional[float] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [T, S], z [T, d]) of one head from PyTorch's torch.nn.functional.scaled_dot_product_attention,
    an implementation independent of attention.attention, on the same q, k, v and mask: the weights are its
    output on an identity V (softmax(...) · I), z its output on v. divisor None: SDPA's own default scale,
    1/√d_k. A fully masked row is all zeros, as in attention.attention (older PyTorch gives NaN there)."""
    scale = None if divisor is None else 1.0 / float(divisor)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    eye = torch.eye(k.shape[-2], dtype=v.dtype, device=v.device)
    weights, z = (sdpa(q, k, x, attn_mask=mask, scale=scale).nan_to_num(0.0) for x in (eye, v))
    return weights, z


def sdpa_difference(steps: AttentionSteps, q, k, v, mask=None, divisor: Optional[float] = None) -> tuple[float, float]:
    """max |difference| between step-by-step attention (`steps`, from attention_steps) and sdpa_reference on
    the q, k, v, mask and divisor given here (not those `steps` recorded): (of the weights, of z)."""
    weights, z = sdpa_reference(q, k, v, mask, divisor)
    return float((steps.weights - weights).abs().max()), float((steps.z - z).abs().max())


def entropy(weights) -> float:
    """Shannon entropy (nats) of one row of weights: 0 for one-hot, log(n) for uniform."""
    w = torch.as_tensor(weights, dtype=torch.float64)
    w = w[w > 0]
    return float(-(w * w.log()).sum())


def uniform_entropy(mask_row) -> float:
    """The entropy of a row spread evenly over the keys it may use: ln(allowed keys) of one mask row
    [S] (True = may attend); masked keys get weight 0 and do not count."""
    return math.log(max(int(torch.as_tensor(mask_row).bool().sum()), 1))


def qk_variance(d_ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), n_samples: int = 4000, seed: int = 0) -> dict:
    """Empirical variance of q·k for q, k with independent N(0, 1) entries: it grows like d_k,
    and dividing by √d_k brings it back to 1 (why the scale keeps softmax out of saturation)."""
    g = torch.Generator().manual_seed(seed)
    raw, scaled = [], []
    for d in d_ks:
        q, k = torch.randn(n_samples, d, generator=g), torch.randn(n_samples, d, generator=g)
        dots = (q * k).sum(-1).double()
        raw.append(float(dots.var()))
        scaled.append(float((dots / math.sqrt(d)).var()))
    return {"d_k": list(d_ks), "raw": raw, "scaled": scaled}


# -- masks ---------------------------------------------------------------------------------------
def example_masks(T: int, prefix_len: int, ids=None, pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Reference masks of size [T, T] (True = may attend) built from viz_transformer.core.masks."""
    out = {"causal": causal_mask(T)[0, 0], "prefix_lm": prefix_lm_mask(T, prefix_len)[0, 0]}
    if ids is not None:
        out["padding"] = padding_mask(torch.as_tensor(ids).view(1, -1), pad_id)[0, 0].expand(T, -1)
    return out


def prefix_lm_layout(run, sep: str = "[sep]") -> tuple[list[str], int]:
    """(pieces, prefix length) of the run's sentence as a prefix LM sees it: one sequence [begin] +
    source + [sep] + target, whose prefix is [begin] + source + [sep]. A one-sequence run is already
    laid out so (its prompt is the prefix); an encoder-decoder run's source (without [end]) and decoder
    input are joined."""
    if run.src_pieces is None:
        return list(run.tgt_pieces), run.prompt_len
    src = [p for p in run.src_pieces if p not in ("[end]", "[pad]")]
    return ["[begin]", *src, sep, *run.tgt_pieces[1:]], len(src) + 2


def masked_scores(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scores with forbidden positions set to -inf (what softmax sees)."""
    return scores.masked_fill(~mask, float("-inf"))


# -- positional encoding -------------------------------------------------------------------------
def pe_similarity(pe: torch.Tensor) -> torch.Tensor:
    """[L, d] -> [L, L] dot products between position vectors."""
    pe = pe.double()
    return (pe @ pe.T).float()


def similarity_by_offset(pe: torch.Tensor, anchors: list[int], max_offset: int) -> dict[int, np.ndarray]:
    """For each anchor position p: PE[p]·PE[p+δ] for δ = 0..max_offset (shorter if past the end).
    For the sinusoidal table the curves coincide: the product depends only on δ."""
    pe = pe.double()
    out = {}
    for p in anchors:
        end = min(pe.shape[0], p + max_offset + 1)
        out[p] = (pe[p:end] @ pe[p]).numpy()
    return out


# -- decoding traces -----------------------------------------------------------------------------
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



# -- RoPE: the rotation, and why only the offset matters ---------------------------------------------------
def rope_angles(cfg, n: int) -> torch.Tensor:
    """cos(pos · θ_i) [n, d_head / 2]: how far RoPE turns each pair of dimensions (i, i + d/2) at each position."""
    cos, _ = cos_sin(cfg, 0, n)
    return cos[:, : cfg.d_head // 2]


def rope_offset_scores(cfg, q: torch.Tensor, k: torch.Tensor, i: int, j: int, shifts: int) -> dict[str, torch.Tensor]:
    """One head's own q (a query row) and k (a key row), both before the rotation [d_head], rotated as if they sat at
    positions (i + s, j + s) and at (i + s, j) for s = 0 .. shifts: the scaled scores [shifts + 1] of each.
    "kept" is flat (the score depends only on the offset i − j); "moved" changes with the offset."""
    n = max(i, j) + shifts + 1
    cos, sin = cos_sin(cfg, 0, n)
    qs = rotate(q.float().expand(1, n, 1, -1), cos, sin)[0, :, 0]          # q placed at every position: [n, d]
    ks = rotate(k.float().expand(1, n, 1, -1), cos, sin)[0, :, 0]
    scale = math.sqrt(cfg.d_head)
    s = torch.arange(shifts + 1)
    return {"kept": (qs[i + s] * ks[j + s]).sum(-1) / scale, "moved": (qs[i + s] * ks[j]).sum(-1) / scale}
