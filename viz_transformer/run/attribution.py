"""The model-running half of attribution: one output step teacher-forced, and the three methods that perturb or
differentiate the input pieces' token embeddings (occlusion, grad × input, integrated gradients, through Captum).

    tgt = step_target(hm, run, 2)               # the token the model wrote at output step 2, forced
    occlusion(hm, tgt)                          # [pieces] drop in log p(token) with each piece's embedding zeroed

The reading-only methods (attention, rollout, value norm), METHODS (all six, one table) and `attribute`, which picks
from it, are in analysis/attribution.py. Captum (and matplotlib, which captum.attr imports on load) is imported on first use only.
"""
from __future__ import annotations

import copy
import threading
import weakref
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from viz_transformer.core.batch import Batch, one_row
from viz_transformer.core.hook_names import layer_name
from viz_transformer.core.hooks import hooks_active
from viz_transformer.run.logit_rules import allowed_logits, never_generated
from viz_transformer.run.forced import output_labels

IG_STEPS = 32          # Captum's Gauss-Legendre steps for integrated gradients (the floor)
MAX_PIECES = 256       # occlusion and integrated gradients refuse longer inputs: each costs a forward per piece / step
ROWS = 8192            # token positions per forward (rows × their length): occluded copies, or IG's points

_FLOAT32: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # a bfloat16 model -> its float32 copy
_FLOAT32_LOCK = threading.Lock()        # sessions asking at once make one copy, not one each


@dataclass(frozen=True)
class StepTarget:
    """One output step, teacher-forced: the ids up to it and where its token is read."""
    batch: Batch            # source (translator) and decoder input cut just after the row that predicts the token
    row: int                # the decoder row whose logits give log p(token)
    token: int              # the id the model wrote at this step
    hook: str               # the capture whose rows are the input pieces' token embeddings
    n_pieces: int           # input pieces: a translator's source, a one-sequence model's prompt ([begin] included)
    pieces: list[str]       # their labels
    banned: tuple[int, ...]  # never-generated ids, at -inf before the softmax (as every decoding strategy sees them)


def n_steps(run) -> int:
    """Output steps of a run: the tokens it wrote, its final [end] included."""
    return len(output_labels(run)[0])


def step_target(hm, run, step: int) -> StepTarget:
    """The output step `step` (1 = the first token written) of `run`, for attribution over its input pieces."""
    if hm.cfg.is_encoder_only:
        raise ValueError("an encoder-only model writes no output, so there is no output token to attribute")
    ids, start = output_labels(run)
    if not 1 <= step <= len(ids):
        raise ValueError(f"step must be between 1 and {len(ids)} (the output's tokens), not {step}")
    row = start + step - 1
    dec = list(run.tgt_ids[: row + 1]) if row + 1 <= len(run.tgt_ids) else list(run.tgt_ids)
    if len(dec) != row + 1:
        raise ValueError(f"the run's decoder input has {len(run.tgt_ids)} ids; step {step} needs {row + 1}")
    if run.src_ids is not None:
        hook, pieces = "src_embed.hook_tok", list(run.src_pieces)
    else:
        hook, pieces = "embed.hook_tok", list(run.tgt_pieces[: run.prompt_len])
    return StepTarget(one_row(run.src_ids, dec, run.prefix_len), row, int(ids[step - 1]), hook, len(pieces), pieces,
                      tuple(never_generated(hm.tokenizer)))


def float32_model(model):
    """The model itself when its weights are float32, else a float32 copy kept while the model lives: gradients
    are taken in float32 even when the model runs in bfloat16."""
    if next(model.parameters()).dtype == torch.float32:
        return model
    with _FLOAT32_LOCK:
        if model not in _FLOAT32:
            _FLOAT32[model] = copy.deepcopy(model).float().eval()
        return _FLOAT32[model]


def _no_logits(b: Batch) -> torch.Tensor:
    """logits_at with no row: the forward projects nothing onto the vocabulary (its hooks read what they need)."""
    return torch.zeros(b.dec.shape, dtype=torch.bool)


def _last_rows(model, batch: Batch, tgt: StepTarget, emb: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
    """The decoder's last residual stream [N, len(rows), d] at `rows` (what the unembedding reads), the input
    pieces' token embeddings replaced by emb [N, pieces, d]. Projected by _project, all rows at once (_logits) or each
    alone (gradients_steps: a backward from one step's logits then goes through that step's projection only)."""
    n, got = emb.shape[0], {}
    b = batch.expand(n) if n > 1 else batch

    def put(x, hook):                                         # x: (N, T, d); the pieces are its first rows
        return torch.cat([emb.to(x.dtype), x[:, tgt.n_pieces:]], 1) if x.shape[1] > tgt.n_pieces else emb.to(x.dtype)

    def keep(x, hook):
        got["h"] = x[:, list(rows)]
    last = layer_name("decoder", model.cfg.n_decoder_layers - 1, "hook_resid_post")
    with hooks_active([(tgt.hook, put), (last, keep)]):
        args = (b.src, b.dec) if b.src is not None else (b.dec,)
        model(*args, prefix_len=b.prefix_len, logits_at=_no_logits(b))
    return got["h"]


def _project(model, h: torch.Tensor, tgt: StepTarget) -> torch.Tensor:
    """Logits [..., V] of last-layer rows h [..., d] (the model's own unembedding), the never-generated ids at -inf."""
    return allowed_logits(model.unembed(h).float().cpu(), list(tgt.banned))


def _logits(model, batch: Batch, tgt: StepTarget, emb: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
    """Logits [N, len(rows), V] at the decoder's `rows`, the input pieces' token embeddings replaced by emb
    [N, pieces, d], the never-generated ids at -inf."""
    return _project(model, _last_rows(model, batch, tgt, emb, rows), tgt)


def _run(model, batch: Batch, tgt: StepTarget, emb: torch.Tensor) -> torch.Tensor:
    """log p(tgt.token) at tgt.row [N] with the input pieces' token embeddings replaced by emb [N, pieces, d]."""
    return torch.log_softmax(_logits(model, batch, tgt, emb, [tgt.row])[:, 0], -1)[:, tgt.token]


def logprob_fn(hm, tgt: StepTarget) -> Callable[[torch.Tensor], torch.Tensor]:
    """f(emb [N, pieces, d]) -> log p(token) [N]: the float32 model, teacher-forced, with those embeddings."""
    model = float32_model(hm.model)
    return lambda emb: _run(model, tgt.batch, tgt, emb.to(model.device))


def embedding(hm, tgt: StepTarget) -> torch.Tensor:
    """The input pieces' token embeddings e as captured at tgt.hook: [1, pieces, d], float32 on the model's device."""
    model, got = float32_model(hm.model), {}

    def keep(x, hook):
        got["e"] = x[:, : tgt.n_pieces].detach().float().clone()
    b = tgt.batch
    with torch.no_grad(), hooks_active([(tgt.hook, keep)]):
        model(*((b.src, b.dec) if b.src is not None else (b.dec,)), prefix_len=b.prefix_len, logits_at=_no_logits(b))
    return got["e"]


def _chunk(tgt: StepTarget, n: int) -> int:
    """Rows per forward: all n while they hold at most ROWS positions together."""
    length = tgt.batch.dec.shape[1] + (tgt.batch.src.shape[1] if tgt.batch.src is not None else 0)
    return max(1, min(n, ROWS // max(length, 1)))


def _captum():
    import captum.attr as ca          # noqa: PLC0415  (lazy: captum and matplotlib load only when used)
    return ca


def _check_long(tgt: StepTarget, what: str) -> None:
    if tgt.n_pieces > MAX_PIECES:
        raise ValueError(f"{what} runs on inputs of at most {MAX_PIECES} pieces; this one has {tgt.n_pieces}")


def occlusion(hm, tgt: StepTarget) -> torch.Tensor:
    """[pieces]: log p(token) − log p(token) with that one piece's token embedding replaced by zeros (its position,
    and everything else, kept). Captum's Occlusion with a one-piece window. The reference the others are held to."""
    _check_long(tgt, "occlusion")
    e = embedding(hm, tgt)
    with torch.no_grad():
        attr = _captum().Occlusion(logprob_fn(hm, tgt)).attribute(
            e, sliding_window_shapes=(1, e.shape[-1]), strides=(1, e.shape[-1]), baselines=0.0,
            perturbations_per_eval=_chunk(tgt, tgt.n_pieces))
    return attr[0].mean(-1).detach().cpu()                       # every feature of a piece's window holds its drop


LOGIT_FLOATS = 1 << 25   # occlusion_steps' logits held at once (128 MiB): perturbations per forward × steps × vocab


def occlusion_steps(hm, run, steps: Sequence[int]) -> dict[int, torch.Tensor]:
    """{step: occlusion(hm, step_target(hm, run, step))} for the output `steps` of one run at once: one
    teacher-forced forward per occluded piece (and one with none), reading the logits of every step's row, where
    the per-step function makes those forwards for each step. The decoder is causal, so a step's row reads nothing
    after it: the same numbers, to float rounding (tests/test_attribution_steps.py)."""
    steps = sorted(set(steps))
    tgts = [step_target(hm, run, s) for s in steps]
    last = tgts[-1]
    _check_long(last, "occlusion")
    model, e, n = float32_model(hm.model), embedding(hm, last), last.n_pieces
    perturbed = e.repeat(n + 1, 1, 1)                          # row 0 as it is; row j + 1 with piece j zeroed
    perturbed[torch.arange(n) + 1, torch.arange(n)] = 0.0
    rows, tokens = [t.row for t in tgts], torch.tensor([t.token for t in tgts])
    vocab = model.cfg.out_vocab
    per = max(1, min(_chunk(last, n + 1), LOGIT_FLOATS // max(1, len(rows) * vocab)))
    logp = []
    with torch.no_grad():
        for a in range(0, n + 1, per):
            lp = torch.log_softmax(_logits(model, last.batch, last, perturbed[a:a + per], rows), -1)
            logp.append(lp[:, torch.arange(len(rows)), tokens])                  # (chunk, steps)
    lp = torch.cat(logp)
    drop = lp[:1] - lp[1:]                                                       # (pieces, steps)
    return {s: drop[:, i].contiguous() for i, s in enumerate(steps)}


def gradients_steps(hm, run, steps: Sequence[int], ig_steps: int = IG_STEPS) -> dict[int, tuple]:
    """{step: (grad_x_input, integrated_gradients)} for the output `steps` of one run at once: one forward of every
    integrated-gradients point (Captum's Gauss-Legendre points and weights), of the input itself (grad × input, and
    f(x)) and of zeros (f(0)), reading every step's row, then one backward per step; the per-step functions make
    those forwards for each step. The same numbers to float rounding (tests/test_attribution_steps.py)."""
    if ig_steps < IG_STEPS:
        raise ValueError(f"integrated gradients takes at least {IG_STEPS} steps, not {ig_steps}")
    steps = sorted(set(steps))
    tgts = [step_target(hm, run, s) for s in steps]
    last = tgts[-1]
    _check_long(last, "integrated gradients")
    model, e, n = float32_model(hm.model), embedding(hm, last), last.n_pieces
    nodes, weights = np.polynomial.legendre.leggauss(ig_steps)              # on [-1, 1]: Captum scales them to [0, 1]
    points = torch.tensor(np.concatenate([0.5 * (nodes + 1), [1.0, 0.0]]), dtype=torch.float32)
    sizes = torch.tensor(np.concatenate([0.5 * weights, [0.0, 0.0]]), dtype=torch.float32)   # x and 0: no weight
    rows, tokens, k = [t.row for t in tgts], torch.tensor([t.token for t in tgts]), len(tgts)
    total = torch.zeros(k, n, e.shape[-1])                                   # Σ size × gradient, per step
    at_x, logp = torch.zeros(k, n, e.shape[-1]), torch.zeros(len(points), k)  # the gradient at x; log p at each point
    per = _chunk(last, len(points))
    for a in range(0, len(points), per):
        b = min(len(points), a + per)
        emb = (points[a:b, None, None] * e).detach().requires_grad_()
        with torch.enable_grad():
            h = _last_rows(model, last.batch, last, emb, rows)                   # (points, steps, d)
            # each step's row projected alone (a list, not one tensor: a backward then reaches no other step's)
            lp = [torch.log_softmax(_project(model, h[:, i], last), -1)[:, tokens[i]] for i in range(k)]
            for i in range(k):                     # the points are batch rows apart: one backward of their sum
                g = torch.autograd.grad(lp[i].sum(), emb, retain_graph=i < k - 1)[0].cpu()
                total[i] += torch.einsum("p,pnd->nd", sizes[a:b], g)
                if a <= ig_steps < b:
                    at_x[i] = g[ig_steps - a]
        logp[a:b] = torch.stack([x.detach() for x in lp], 1)
    ends = logp[ig_steps:]                                                    # f(x), f(0)
    x = e[0].cpu()
    out = {}
    for i, s in enumerate(steps):
        attr = total[i] * x                                                   # (pieces, d), the baseline zeros
        gap = float(ends[0, i] - ends[1, i])
        out[s] = ((at_x[i] * x).norm(dim=-1),
                  IGResult(attr.norm(dim=-1), attr.sum(-1), float(attr.sum()) - gap, gap))
    return out


def grad_x_input(hm, tgt: StepTarget) -> torch.Tensor:
    """[pieces]: ‖(∂ log p(token) / ∂e_j) ⊙ e_j‖₂ over the d_model features (Captum's InputXGradient), in float32."""
    e = embedding(hm, tgt)
    with torch.enable_grad():
        attr = _captum().InputXGradient(logprob_fn(hm, tgt)).attribute(e.requires_grad_())
    return attr[0].detach().norm(dim=-1).cpu()


@dataclass(frozen=True)
class IGResult:
    scores: torch.Tensor     # [pieces] L2 norm over features of the attributions
    signed: torch.Tensor     # [pieces] the signed attributions summed over features (they add up to about the gap)
    error: float             # completeness: Σ attributions (signed, over pieces and features) − (f(x) − f(0))
    gap: float               # f(x) − f(0): log p(token) with the embeddings, minus with all of them zero


def integrated_gradients(hm, tgt: StepTarget, steps: int = IG_STEPS) -> IGResult:
    """Captum's IntegratedGradients on the input pieces' token embeddings, baseline all zeros, `steps`
    Gauss-Legendre points (at least IG_STEPS), L2-aggregated per piece, with its completeness error."""
    if steps < IG_STEPS:
        raise ValueError(f"integrated gradients takes at least {IG_STEPS} steps, not {steps}")
    _check_long(tgt, "integrated gradients")
    e, f = embedding(hm, tgt), logprob_fn(hm, tgt)
    with torch.enable_grad():
        attr, delta = _captum().IntegratedGradients(f).attribute(
            e.requires_grad_(), baselines=torch.zeros_like(e), n_steps=steps, internal_batch_size=_chunk(tgt, steps),
            return_convergence_delta=True)
    a = attr[0].detach().cpu()
    return IGResult(a.norm(dim=-1), a.sum(-1), float(delta[0]), float(a.sum() - delta[0]))   # delta = Σ − gap
