"""Attention beside attribution: six scores per input piece for one output token, and how far each agrees with
occlusion (Kendall τ, the pieces ranked most differently), on one text or over a corpus.

    from viz_transformer import attribute
    attribute(hm, "我是一名工程师。", step=2, method="occlusion")       # [source pieces]

The methods (also on the app's page; i = the decoder row that predicts the step's token, j = an input piece:
a translator's source pieces, a one-sequence model's prompt pieces with its [begin]):
    attention             the step's cross-attention row (one-sequence models: the self-attention row over the prompt),
                          mean over heads, for one layer or (layer=None) the mean over layers
    rollout               an encoder-decoder's source_attribution row; a one-sequence model's row of the decoder
                          rollout over the prompt (Abnar & Zuidema 2020)
    value_norm            ‖Σ_h α_h,ij f_h(x_j)‖, f_h(x_j) = W_O,h v_h,j: the norm of each piece's weighted, transformed
                          value vector summed over heads as the output projection sums them (Kobayashi et al. 2020),
                          for one layer or the mean over layers
    grad_x_input          ‖(∂ log p(token) / ∂e_j) ⊙ e_j‖₂, e_j the piece's token embedding (src_embed / embed.hook_tok)
    integrated_gradients  Captum's IntegratedGradients on e, zero baseline, ≥ 32 steps, ‖·‖₂ per piece
    occlusion             log p(token) − log p(token | e_j = 0): the reference effect
log p is over the ids a decoding strategy may choose (never-generated ids at −inf), teacher-forced on the
model's own output; gradients in float32.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

import numpy as np
import pandas as pd
import torch

from viz_transformer.analysis.pattern_rows import pattern_rows
from viz_transformer.analysis.windows import rollout_rows, source_attribution_rows
from viz_transformer.core.batch import forward
from viz_transformer.core.hook_names import layer_name
from viz_transformer.run import attribution as grads
from viz_transformer.run.attribution import IGResult, StepTarget, n_steps, step_target
from viz_transformer.run.in_threads import map_in_threads

N_DIFFERENT = 3          # pieces marked per method: those whose rank differs most from occlusion's
AUTO_PIECES = 64         # past this many input pieces the page computes occlusion and the gradients on a button: their
                         # cost grows with the pieces (one forward per piece, per step), the page's first view must not
ROLLOUT_CELLS = 100_000_000   # past this many attention weights (rollout_cells) the page's rollout waits for the button:
                              # the rollout row reads every head's whole pattern at every layer, so its cost grows with these


# -- the reading-only methods, from one capture -------------------------------------------------------------
def _block(hm) -> str:
    return "cross_attn" if hm.cfg.is_encoder_decoder else "self_attn"


CAPTURE_BYTES = 2 << 30     # the attention patterns compare_step's own capture may hold


def capture_bytes(hm, tgt: StepTarget) -> int:
    """The attention patterns a capture of tgt's batch holds for the reading methods (float32): each decoder layer's
    pattern over the step's rows (a translator's cross-attention), and a translator's encoder self-attention for the
    rollout."""
    cfg, T = hm.cfg, tgt.batch.dec.shape[1]
    S = tgt.batch.src.shape[1] if tgt.batch.src is not None else 0
    if cfg.is_encoder_decoder:
        return (cfg.n_decoder_layers * T * S + cfg.n_encoder_layers * S * S) * cfg.n_heads * 4
    return cfg.n_decoder_layers * cfg.n_heads * T * T * 4


def check_size(hm, tgt: StepTarget) -> None:
    """A clear refusal before a capture that would not fit (a 2,048-piece text on a 24-layer model: ~12 GB)."""
    need = capture_bytes(hm, tgt)
    if need > CAPTURE_BYTES:
        raise ValueError(f"comparing attention with attribution at this length would hold {need / 2**30:.1f} GiB of "
                         f"attention patterns (the most is {CAPTURE_BYTES / 2**30:.0f} GiB): use a shorter text")


def read_names(hm) -> list[str]:
    """What attention, value norms and rollout read: every decoder layer's (cross-)attention pattern and values;
    for the rollout a one-sequence model's decoder self-attention and its layer-0 mask, a translator's encoder
    self-attention and last cross-attention. A run that holds them (its patterns stored, or their q, k and mask: a
    lean run) answers for any of its steps: a step's rows see no later position."""
    blk, cfg = _block(hm), hm.cfg
    names = {layer_name("decoder", i, f"{blk}.hook_{k}") for i in range(cfg.n_decoder_layers) for k in ("pattern", "v")}
    if cfg.is_encoder_decoder:
        names |= {layer_name("encoder", i, "self_attn.hook_pattern") for i in range(cfg.n_encoder_layers)}
    else:                                   # its self-attention patterns are already in: the rollout's reach
        names.add(layer_name("decoder", 0, "self_attn.hook_mask"))
    return sorted(names)


def _capture(hm, tgt: StepTarget):
    """read_names of tgt's batch: one forward of its own (for a run that lacks them), projecting no row onto the
    vocabulary (nothing here reads one)."""
    check_size(hm, tgt)
    no_row = torch.zeros_like(tgt.batch.dec, dtype=torch.bool)
    return forward(hm.model, tgt.batch, capture=True, names_filter=read_names(hm), logits_at=no_row)[1]


def reading_cache(hm, run, tgt: StepTarget):
    """The run's own captures when they hold read_names (the explorer's runs do: no forward), else tgt's capture."""
    cache = getattr(run, "cache", None)
    return cache if cache is not None and all(n in cache for n in read_names(hm)) else _capture(hm, tgt)


def _layers(hm, layer: Optional[int]) -> list[int]:
    L = hm.cfg.n_decoder_layers
    if layer is None:
        return list(range(L))
    if not 0 <= int(layer) < L:
        raise ValueError(f"layer must be between 0 and {L - 1}, not {layer}")
    return [int(layer)]


def _row(cache, hm, tgt: StepTarget, i: int) -> torch.Tensor:
    """Layer i's (cross-)attention row of the step over the input pieces, per head: [H, pieces] (float64)."""
    return pattern_rows(cache, f"decoder.{_block(hm)}", i, (tgt.row, tgt.row + 1))[:, 0, : tgt.n_pieces].double()


def attention_row(hm, tgt: StepTarget, layer: Optional[int] = None, cache=None) -> torch.Tensor:
    """[pieces]: mean over heads of the step's (cross-)attention row over the input pieces, for `layer` or the
    mean over layers. cache: read_names of tgt's batch or of its run (reading_cache), else a capture is made."""
    cache = cache or _capture(hm, tgt)
    return torch.stack([_row(cache, hm, tgt, i).mean(0) for i in _layers(hm, layer)]).mean(0).float()


def value_norms(hm, tgt: StepTarget, layer: Optional[int] = None, cache=None) -> torch.Tensor:
    """[pieces]: ‖Σ_h α_h,ij W_O,h v_h,j‖₂ (Kobayashi et al. 2020) for `layer`, or the mean over layers."""
    cache = cache or _capture(hm, tgt)
    blk, H = _block(hm), hm.cfg.n_heads
    out = []
    for i in _layers(hm, layer):
        p = _row(cache, hm, tgt, i).float()                                                      # (H, P)
        v = cache[layer_name("decoder", i, f"{blk}.hook_v")][0, : tgt.n_pieces].float()          # (P, kv_head, dh)
        v = v.repeat_interleave(H // v.shape[1], dim=1)                                           # (P, H, dh)
        W = hm.model.decoder[i].cross_attn.W_O if blk == "cross_attn" else hm.model.decoder[i].self_attn.W_O
        # the heads' weighted values side by side, through W_O in one float32 product: (P, H·dh) @ (H·dh, d)
        weighted = (v * p.T.unsqueeze(-1)).flatten(1) @ W.weight.detach().float().cpu().T        # (P, d)
        out.append(weighted.double().norm(dim=-1))
    return torch.stack(out).mean(0).float()


def rollout_row(hm, tgt: StepTarget, cache=None) -> torch.Tensor:
    """[pieces]: a translator's source_attribution row; a one-sequence model's decoder-rollout row over the prompt,
    carried down the layers over the positions the row can reach (windows.rollout_rows)."""
    cache = cache or _capture(hm, tgt)
    if hm.cfg.is_encoder_decoder:
        return source_attribution_rows(cache, (tgt.row, tgt.row + 1))[0]
    return rollout_rows(cache, "decoder", (tgt.row, tgt.row + 1))[0, : tgt.n_pieces]


# -- the methods, one table ------------------------------------------------------------------------------------
Scores = Union[torch.Tensor, IGResult]


@dataclass(frozen=True)
class Method:
    """One way of scoring the input pieces for one output step."""
    fn: Callable[..., Scores]    # (hm, tgt, layer, cache) -> [pieces] (integrated gradients: its IGResult); cache:
                                 # reading_cache's, or None (the reading methods then capture tgt's batch themselves)
    needs_gradients: bool        # differentiates log p(token) through a float32 copy of the model
    per_layer: bool              # reads one decoder layer's attention (`layer`; None: the mean over layers)


METHODS: dict[str, Method] = {    # in the order every table and figure lists them
    "attention": Method(attention_row, needs_gradients=False, per_layer=True),
    "rollout": Method(lambda hm, tgt, layer, cache: rollout_row(hm, tgt, cache), needs_gradients=False,
                      per_layer=False),
    "value_norm": Method(value_norms, needs_gradients=False, per_layer=True),
    "grad_x_input": Method(lambda hm, tgt, layer, cache: grads.grad_x_input(hm, tgt), needs_gradients=True,
                           per_layer=False),
    "integrated_gradients": Method(lambda hm, tgt, layer, cache: grads.integrated_gradients(hm, tgt),
                                   needs_gradients=True, per_layer=False),
    "occlusion": Method(lambda hm, tgt, layer, cache: grads.occlusion(hm, tgt), needs_gradients=False,
                        per_layer=False),
}
REFERENCE = "occlusion"          # the effect every other method's ranking is held to
COMPARED = tuple(m for m in METHODS if m != REFERENCE)


def scores_of(got: Scores) -> torch.Tensor:
    """[pieces]: a method's scores (integrated gradients' from its IGResult)."""
    return got.scores if isinstance(got, IGResult) else got


def attribute(hm, text: str, step: int, method: str, layer: Optional[int] = None, run=None) -> torch.Tensor:
    """One score per input piece [pieces] for the token the model writes at output step `step` (1 = the first),
    by `method` (a name in METHODS; the module docstring defines each). layer: the per_layer methods only (None =
    the mean over layers). run: hm.run(text) already made (the page's), else it is made here. Integrated gradients'
    completeness error: integrated_gradients(hm, step_target(...)).error."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    run = run if run is not None else hm.run(text)
    return scores_of(METHODS[method].fn(hm, step_target(hm, run, step), layer, None))


# -- agreement with occlusion ------------------------------------------------------------------------------------
def kendall_tau(a, b) -> float:
    """Kendall's τ-b of two score lists (ties counted as scipy counts them); NaN when either is constant."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"τ needs two lists of the same length, got {a.shape} and {b.shape}")
    iu = np.triu_indices(len(a), 1)
    da, db = np.sign(a[:, None] - a[None, :])[iu], np.sign(b[:, None] - b[None, :])[iu]
    denom = np.sqrt(float(np.count_nonzero(da)) * float(np.count_nonzero(db)))
    return float((da * db).sum() / denom) if denom > 0 else float("nan")


def ranks(scores) -> np.ndarray:
    """Rank of each piece, 1 = the highest score (ties by position)."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    r = np.empty(len(order), dtype=int)
    r[order] = np.arange(1, len(order) + 1)
    return r


def most_different(scores, reference, k: int = N_DIFFERENT) -> list[int]:
    """The (at most k) pieces whose rank under `scores` differs most from their rank under `reference`,
    largest difference first; pieces ranked the same are never listed."""
    gap = np.abs(ranks(scores) - ranks(reference))
    order = np.argsort(-gap, kind="stable")
    return [int(i) for i in order[:k] if gap[i] > 0]


@dataclass
class StepComparison:
    """Every method at one output step, and its agreement with occlusion."""
    step: int
    token: str                                   # the piece written at this step
    pieces: list[str]                            # the input pieces (the rows' columns)
    scores: dict[str, np.ndarray] = field(default_factory=dict)    # method -> [pieces]
    tau: dict[str, float] = field(default_factory=dict)            # method -> τ with occlusion
    different: dict[str, list[int]] = field(default_factory=dict)  # method -> pieces ranked most differently
    ig: Optional[IGResult] = None
    capped: bool = False                         # the input is past MAX_PIECES: no occlusion, no gradients
    layer_tau: dict[tuple[str, int], float] = field(default_factory=dict)   # (method, layer) -> τ (per_layer)

    @property
    def best(self) -> Optional[str]:
        """The method (occlusion aside) with the highest τ, None when none has one."""
        got = {m: v for m, v in self.tau.items() if np.isfinite(v)}
        return max(got, key=got.get) if got else None


def n_pieces(run) -> int:
    """Input pieces of a run: a translator's source pieces, a one-sequence model's prompt."""
    return len(run.src_ids) if run.src_ids is not None else run.prompt_len


def rollout_cells(cfg, n_pieces: int) -> int:
    """The attention weights a rollout row reads for an input of n_pieces: every row of every head of every layer
    of the block it carries the row down (a translator's encoder, a one-sequence model's decoder)."""
    layers = cfg.n_encoder_layers if cfg.is_encoder_decoder else cfg.n_decoder_layers
    return layers * cfg.n_heads * n_pieces ** 2


def rollout_at_once(cfg, n_pieces: int) -> bool:
    """Whether a page computes the rollout row without being asked (ROLLOUT_CELLS)."""
    return rollout_cells(cfg, n_pieces) <= ROLLOUT_CELLS


def compare_step(hm, run, step: int, layer: Optional[int] = None, gradients: bool = True,
                 per_layer: bool = False, reference: bool = True, rollout: bool = True,
                 given: Optional[dict] = None) -> StepComparison:
    """Every method in METHODS at one step (those that need gradients only with gradients=True, occlusion only with
    reference=True, neither past MAX_PIECES: they run the model per piece or per point; rollout only with
    rollout=True), with each method's τ against occlusion and its most different pieces. per_layer: also τ of each
    per_layer method at each layer alone (layer_tau). given: {method: scores} computed already (corpus_taus makes the
    model-running methods for every step of a run at once), used instead of the method's own call."""
    tgt = step_target(hm, run, step)
    cache = reading_cache(hm, run, tgt)                 # the run's captures, else one forward for the reading methods
    out = StepComparison(step, hm.tokenizer.pieces([tgt.token])[0], tgt.pieces)
    out.capped = tgt.n_pieces > grads.MAX_PIECES
    no_gradients = out.capped or not gradients
    off = {"rollout": not rollout, REFERENCE: out.capped or not reference}
    for name, m in METHODS.items():
        if not (off.get(name, False) or (m.needs_gradients and no_gradients)):
            got = given[name] if given and name in given else m.fn(hm, tgt, layer, cache)
            out.ig = got if isinstance(got, IGResult) else out.ig
            out.scores[name] = scores_of(got).numpy()
    if REFERENCE not in out.scores:
        return out
    ref = out.scores[REFERENCE]
    for name in COMPARED:
        if name in out.scores:
            out.tau[name] = kendall_tau(out.scores[name], ref)
            out.different[name] = most_different(out.scores[name], ref)
    for i in range(hm.cfg.n_decoder_layers) if per_layer else ():
        for name, m in METHODS.items():
            if m.per_layer:
                out.layer_tau[(name, i)] = kendall_tau(scores_of(m.fn(hm, tgt, i, cache)).numpy(), ref)
    return out


# -- how often: τ over every output step of a corpus ----------------------------------------------------------------
def corpus_taus(hm, texts: Sequence[str], progress: Optional[Callable[[int, int], None]] = None,
                layer: Optional[int] = None, gradients: bool = True, max_steps: Optional[int] = None,
                per_layer: bool = False, workers: int = 1) -> pd.DataFrame:
    """One row per (sentence, output step, method, layer): τ of that method with occlusion; layer -1 is the
    mean over layers (or `layer`), per_layer adds attention and value_norm at each layer alone. Texts past
    MAX_PIECES give no rows. progress(done, total) after each sentence. max_steps: the first steps only.
    workers: sentences at once, each on a thread of this process (run/in_threads.py), the longest first: the
    same rows, in the sentences' order."""
    def one(k_text) -> list[dict]:
        k, text = k_text
        run, rows = hm.run(text), []
        steps = n_steps(run) if max_steps is None else min(n_steps(run), max_steps)
        given = _every_step(hm, run, steps, gradients) if steps and n_pieces(run) <= grads.MAX_PIECES else {}
        for s in range(1, steps + 1):
            c = compare_step(hm, run, s, layer, gradients, per_layer, given=given.get(s))
            rows += [{"sentence": k, "step": s, "method": m, "layer": -1, "tau": v} for m, v in c.tau.items()]
            rows += [{"sentence": k, "step": s, "method": m, "layer": i, "tau": v} for (m, i), v in c.layer_tau.items()]
        return rows
    # on threads the longest sentences go first, so no long one is left running alone at the end
    order = sorted(range(len(texts)), key=lambda k: -len(texts[k])) if workers > 1 else range(len(texts))
    found: dict[int, list[dict]] = {}
    for done, (k, rows) in enumerate(zip(order, map_in_threads(one, [(k, texts[k]) for k in order], workers)), 1):
        found[k] = rows
        if progress is not None:
            progress(done, len(texts))
    return pd.DataFrame([r for k in range(len(texts)) for r in found[k]],
                        columns=["sentence", "step", "method", "layer", "tau"])


def _every_step(hm, run, steps: int, gradients: bool) -> dict[int, dict]:
    """{step: {method: scores}} of the methods that run the model, for steps 1..steps of one run at once
    (grads.occlusion_steps, grads.gradients_steps: the same numbers as each step alone, in far fewer passes)."""
    occluded = grads.occlusion_steps(hm, run, range(1, steps + 1))
    both = grads.gradients_steps(hm, run, range(1, steps + 1)) if gradients else {}
    return {s: {REFERENCE: occluded[s], **({"grad_x_input": both[s][0], "integrated_gradients": both[s][1]}
                                           if s in both else {})} for s in occluded}


def tau_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per method (layer -1 rows: the mean over layers): steps, median τ, mean τ, and the share of steps with
    τ > 0.5 (NaN τ left out)."""
    d = df[df["layer"] == -1].dropna(subset=["tau"])
    g = d.groupby("method", sort=False)["tau"]
    out = pd.DataFrame({"steps": g.size(), "median": g.median(), "mean": g.mean(),
                        "above_half": g.apply(lambda x: float((x > 0.5).mean()))})
    return out.reindex([m for m in COMPARED if m in out.index])
