"""The logit lens: read every decoder layer's residual stream with the model's own final norm and
unembedding, to see at which layer the model already "knows" the token it finally chooses.

    lp = logit_lens(hm, hm.run("我是一名工程师。"))      # [n_decoder_layers + 1, decoder pos, vocab]
    view = lens_view(hm, run, lp)                          # top tokens and P(final token) per cell

Row 0 reads `decoder.0.hook_resid_pre` (the embeddings), row i + 1 reads `decoder.{i}.hook_resid_post`;
the last row is the model's own output, so it equals log_softmax(run.logits).
The lens assumes an earlier layer's stream already lives in the space the last layer's decoder reads:
nothing was trained for that, so early rows are a rough reading, sharper the closer to the top.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from viz_transformer.run.logit_rules import allowed_logits, never_generated
from viz_transformer.core.batch import forward, one_row
from viz_transformer.core.hook_names import layer_name


def lens_names(cfg) -> list[str]:
    """The residual streams the lens reads, bottom to top: n_decoder_layers + 1 capture names."""
    return [layer_name("decoder", 0, "hook_resid_pre")] + \
        [layer_name("decoder", i, "hook_resid_post") for i in range(cfg.n_decoder_layers)]


@torch.no_grad()
def read_out(model, resid: torch.Tensor) -> torch.Tensor:
    """Residual stream [..., d_model] -> log-probabilities [..., vocab] through the final norm and
    unembedding (the model's own decoder_norm and lm_head, as its forward applies them)."""
    return torch.log_softmax(model.unembed(resid.float()), -1)


@torch.no_grad()
def lens_from_ids(hm, dec_ids: Sequence[int], src_ids: Optional[Sequence[int]] = None,
                  prefix_len: Optional[int] = None, fwd_hooks=(), positions: slice = slice(None)) -> torch.Tensor:
    """The lens over a given decoder input (and source, for a translator), e.g. the sequence a
    sampled or beam-searched trace has produced so far: [n_decoder_layers + 1, len(dec_ids), vocab];
    positions: only those positions are read out (the unembedding of a large vocabulary is the cost)."""
    names = lens_names(hm.cfg)
    _, cache = forward(hm.model, one_row(src_ids, dec_ids, prefix_len), fwd_hooks, capture=True, names_filter=names)
    model = hm.model
    return read_out(model, torch.stack([cache[n][0, positions] for n in names]))      # (L+1, T, V)


def logit_lens(hm, run, positions: slice = slice(None)) -> torch.Tensor:
    """log-probabilities [n_decoder_layers + 1, decoder pos, vocab] for a Run (`hm.run(text)`): from
    its cache when it captured the residual streams, else by re-running its exact ids. positions: only
    those decoder positions (e.g. the window a page shows)."""
    names = lens_names(hm.cfg)
    if all(n in run.cache for n in names):
        return read_out(hm.model, torch.stack([run.cache[n][0, positions] for n in names]))
    return lens_from_ids(hm, run.tgt_ids, run.src_ids, run.prefix_len, positions=positions)


@dataclass
class LensView:
    """What the lens page shows, per (row, position): the top tokens and the final token's probability."""
    rows: list[str]               # "embeddings", "layer 0", ... (the lens_names, shortened)
    positions: list[str]          # decoder pieces, the query that predicts the next token
    final_ids: list[int]          # per position: the token the last layer ranks first (never a banned id)
    final_pieces: list[str]
    final_prob: torch.Tensor      # [rows, pos]: P(final token at that position) read at that row
    top_ids: torch.Tensor         # [rows, pos, k]
    top_probs: torch.Tensor       # [rows, pos, k]
    top_pieces: list[list[list[str]]]
    output_start: int             # first position whose prediction is part of the output (prompt_len - 1)


def lens_view(hm, run, lp: Optional[torch.Tensor] = None, k: int = 5,
              window: Optional[tuple[int, int]] = None) -> LensView:
    """Summarise `logit_lens(hm, run)`. The final token of a position is the last row's most likely
    token among those decoding may choose ([pad], [unk], [begin] excluded): for the positions from
    `prompt_len - 1` on it is the greedy output token (or [end]) the run generated.
    window (a, b), with lp None: only positions a … b-1 are read out (a large vocabulary's unembedding of
    every position costs seconds and gigabytes); the view keeps every position, the others' cells NaN
    and "", and their final token from the run's own logits (the last row of the lens)."""
    T = len(run.tgt_ids)
    a, b = window or (0, T)
    lp = logit_lens(hm, run, slice(a, b)) if lp is None else lp
    L, W, V = lp.shape
    if W != b - a:
        raise ValueError(f"the lens has {W} positions but the run's decoder input has {b - a}")
    tok = hm.tokenizer
    if (a, b) == (0, T) or len(run.predicted_ids) != T:
        last = lp[-1] if (a, b) == (0, T) else run.logits.float()
        final = allowed_logits(last, never_generated(tok)).argmax(-1)                # (T,)
    else:                                                   # the same argmax, taken in the run (capture.Run)
        final = torch.tensor(run.predicted_ids)
    final_prob = torch.full((L, T), float("nan"))                # exp of the few read, not of every (row, piece)
    final_prob[:, a:b] = lp.gather(-1, final[a:b].view(1, W, 1).expand(L, W, 1)).squeeze(-1).exp()   # (L, T)
    top_p, top_i = torch.full((L, T, min(k, V)), float("nan")), torch.zeros((L, T, min(k, V)), dtype=torch.long)
    top_lp, top_i[:, a:b] = lp.topk(min(k, V), -1)                                   # (L, T, k): log is monotone
    top_p[:, a:b] = top_lp.exp()
    blank = [""] * min(k, V)
    pieces = [[tok.pieces(top_i[r, p].tolist()) if a <= p < b else blank for p in range(T)] for r in range(L)]
    rows = ["embeddings"] + [f"layer {i}" for i in range(L - 1)]
    return LensView(rows, list(run.tgt_pieces), final.tolist(), tok.pieces(final.tolist()), final_prob,
                    top_i, top_p, pieces, run.prompt_len - 1)


def first_row_known(view: LensView) -> list[Optional[int]]:
    """Per position, the first lens row from which on the final token is the top token in every row
    up to the last; None when the last row's top token is one decoding may not choose."""
    out = []
    for p in range(len(view.positions)):
        top = [int(view.top_ids[r, p, 0]) == view.final_ids[p] for r in range(len(view.rows))]
        r = len(top)
        while r > 0 and top[r - 1]:
            r -= 1
        out.append(r if r < len(top) else None)
    return out


def trace_lens(hm, trace, step: int) -> torch.Tensor:
    """The lens of decoding step `step` (0-based) of a Trace (greedy, sampled or beam): every row read at
    the query that chose that step's token, on the ids decoded before it: [n_decoder_layers + 1, vocab]."""
    if not 0 <= step < len(trace.steps):
        raise ValueError(f"step {step} is out of range: the trace has steps 0 … {len(trace.steps) - 1}")
    ids = list(trace.prompt_ids) + trace.output_ids[:step]
    prefix_len = len(trace.prompt_ids) if hm.cfg.architecture == "prefix_lm" else None
    return lens_from_ids(hm, ids, trace.src_ids, prefix_len, positions=slice(-1, None))[:, -1]


def column(hm, lp_col: torch.Tensor, final_id: int, k: int = 3) -> dict:
    """One position's lens [rows, vocab] as a view's column: P(final_id) per row [rows], the top-k
    pieces and probabilities per row."""
    probs = lp_col.exp()
    top_p, top_i = probs.topk(k, -1)                                                   # (rows, k)
    return {"final_prob": probs[:, final_id], "top_pieces": [hm.tokenizer.pieces(r.tolist()) for r in top_i],
            "top_probs": top_p}


def view_column(view: LensView, pos: int, k: int = 3) -> dict:
    """Position `pos` of a LensView in the shape `column` returns."""
    return {"final_prob": view.final_prob[:, pos], "top_pieces": [r[pos][:k] for r in view.top_pieces],
            "top_probs": view.top_probs[:, pos, :k]}
