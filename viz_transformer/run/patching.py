"""Activation patching between two inputs whose pieces align one to one: run the second (B) with one
component taken from the first (A), and measure how much of A's output that restores.

    df = patching_scores(hm, "我喜欢你。", "你喜欢我。", over="heads")   # one row per head
    df.sort_values("score").tail()                                      # where the difference lives

The output measured is A's greedy output (its [end] included when it ended), teacher-forced on the
same decoder ids in both runs: logprob = its summed log-probability under the decoding distribution
([pad], [unk], [begin] at -inf). score = (patched - B) / (A - B): 0 = the patch changes nothing,
1 = it restores A's output as fully as A itself. An encoder-only model (BERT) generates nothing: what is measured
is the log p of A's top piece at A's first [MASK] (its masked-LM head's), at that position in every run.

Components (`over`), each patched with A's value in B's run, at every position unless `pos` is set:
  "heads"   a head's `hook_z` slice, every attention block's every head (encoder heads too);
  "blocks"  an attention block's `hook_out` (all its heads together);
  "resid"   the residual stream at one position and one layer: `{part}.0.hook_resid_pre`, then
            every `{part}.i.hook_resid_post`; part = "encoder" for a translator (where the two
            inputs differ), "decoder" for decoder-only and prefix-LM models.
Batched: one forward of A (captured), then forwards of B with one batch row per component.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import pandas as pd
import torch

from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input, default_new_tokens
from viz_transformer.run.logit_rules import allowed_logits, never_generated
from viz_transformer.core.batch import forward, make_batch, one_row
from viz_transformer.core.tokenizer import source_pieces
from viz_transformer.core.hooks import Cache
from viz_transformer.core.encoding import ModelInput, as_input, encode_encoder
from viz_transformer.run.interventions import all_heads
from viz_transformer.core.hook_names import available_blocks, block_prefix, layer_name, n_layers, parse_prefix, per_head

OVER = ("heads", "blocks", "resid")
CHUNK = 96          # batch rows per forward: bounds memory at [CHUNK, T, vocab] logits


@dataclass(frozen=True)
class Patch:
    """One component of A put into B's run: the capture `name`; for a `hook_z`, one `head`; and one
    position `pos` along that tensor's position axis (None: every position)."""
    name: str
    head: Optional[int] = None
    pos: Optional[int] = None


@dataclass
class Pair:
    """Two inputs ready to patch: the same decoder ids after their prompts (A's output), their source
    or prompt ids of equal length, and A's captured run."""
    src_a: Optional[list[int]]       # translator: encoder inputs (pieces + [end]); None otherwise
    src_b: Optional[list[int]]
    dec_a: list[int]                 # decoder input: [begin] + A's output, or A's prompt + A's output
    dec_b: list[int]                 # the same, with B's prompt for an LM
    prefix_len: Optional[int]
    labels: list[int]                # A's output ids (with [end] when it ended): what logprob measures
    start: int                       # logit row predicting labels[0]
    pieces_a: list[str]              # the aligned input pieces: source (translator) or decoder input
    pieces_b: list[str]
    output_a: str
    output_b: str
    cache_a: Cache
    logits_a: torch.Tensor           # [dec pos, vocab]
    input_b: Optional[ModelInput] = None     # encoder-only: B's ids and segments (no decoder ids)


def resid_part(cfg) -> str:
    return "encoder" if cfg.is_encoder_decoder or cfg.is_encoder_only else "decoder"


def resid_names(cfg, part: Optional[str] = None) -> list[str]:
    """Residual streams of `part`, bottom to top: the input of layer 0, then every layer's output."""
    part = part or resid_part(cfg)
    n = cfg.n_encoder_layers if part == "encoder" else cfg.n_decoder_layers
    if n == 0:
        raise ValueError(f"this {cfg.architecture} model has no {part}")
    return [layer_name(part, 0, "hook_resid_pre")] + [layer_name(part, i, "hook_resid_post") for i in range(n)]


def resid_layer(stream: int) -> Optional[int]:
    """The layer a residual-stream index (the "layer" column of resid rows, a row of score_grid) is read
    after: None for stream 0 (the embeddings, before layer 0), else stream - 1."""
    return None if stream == 0 else stream - 1


@torch.no_grad()
def prepare_pair(hm, text_a, text_b, max_new_tokens: Optional[int] = None) -> Pair:
    """Tokenize both texts once (or take the ModelInputs runs already made: `run.input`), generate A's
    greedy output and capture A's run. ValueError when the
    pieces do not line up one to one (different counts), naming both counts and pieces."""
    model, tok, cfg = hm.model, hm.tokenizer, hm.cfg
    if cfg.is_encoder_only:
        return _blank_pair(hm, text_a, text_b)
    max_new_tokens = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
    inp_a, inp_b = (as_input(tok, cfg, t, max_new_tokens) for t in (text_a, text_b))
    _check_aligned(tok, inp_a.ids, inp_b.ids)
    greedy = DecodeSettings(max_new_tokens=max_new_tokens)
    trace_a = decode_input(model, tok, inp_a, greedy)
    trace_b = decode_input(model, tok, inp_b, greedy)
    out = trace_a.generated_ids
    logits, cache = forward(model, make_batch(cfg, [inp_a], [out]), capture=True)
    dec_a, dec_b = inp_a.decoder_ids(out), inp_b.decoder_ids(out)
    src_a, src_b = (list(x.src) if x.src is not None else None for x in (inp_a, inp_b))
    pieces = (src_a, src_b) if src_a is not None else (dec_a, dec_b)
    return Pair(src_a, src_b, dec_a, dec_b, inp_a.prefix_len, list(trace_a.output_ids), len(inp_a.prompt) - 1,
                *(source_pieces(tok, p) if src_a is not None else tok.pieces(p) for p in pieces), tok.decode(out),
                tok.decode(trace_b.generated_ids), cache, logits[0])


class Misaligned(ValueError):
    """Texts A and B cut into different numbers of pieces (pieces_a, pieces_b), so no position of one patches
    into the other: a caller can say so in its own words and list the pieces."""

    def __init__(self, pieces_a: list[str], pieces_b: list[str]):
        self.pieces_a, self.pieces_b = pieces_a, pieces_b
        super().__init__(f"the two texts must have the same number of pieces to patch one into the other: "
                         f"{len(pieces_a)} ({' '.join(pieces_a)}) and {len(pieces_b)} ({' '.join(pieces_b)})")


def _check_aligned(tok, ids_a, ids_b) -> None:
    if len(ids_a) != len(ids_b):
        raise Misaligned(source_pieces(tok, ids_a), source_pieces(tok, ids_b))


def _blank_pair(hm, text_a, text_b) -> Pair:
    """An encoder-only model's Pair: what is measured is A's top piece at A's first [MASK] (labels, start)."""
    model, tok, cfg = hm.model, hm.tokenizer, hm.cfg
    inp_a, inp_b = (t if isinstance(t, ModelInput) else encode_encoder(tok, cfg, t) for t in (text_a, text_b))
    blanks = [i for i, x in enumerate(inp_a.src) if x == getattr(tok, "mask_id", None)]
    if cfg.head != "mlm" or not blanks:
        raise ValueError("patching an encoder-only model measures its masked-LM prediction at a [MASK] of text A: "
                         + ("this model has no masked-LM head" if cfg.head != "mlm" else "text A has none"))
    _check_aligned(tok, inp_a.src, inp_b.src)
    logits, cache = forward(model, make_batch(cfg, [inp_a]), capture=True)
    logits_b = forward(model, make_batch(cfg, [inp_b]))[0][0]
    pos = blanks[0]
    top = int(logits[0, pos].argmax())
    return Pair(list(inp_a.src), list(inp_b.src), [], [], None, [top], pos, tok.pieces(list(inp_a.src)),
                tok.pieces(list(inp_b.src)), tok.pieces([top])[0], tok.pieces([int(logits_b[pos].argmax())])[0],
                cache, logits[0], inp_b)


def _row_hooks(pair: Pair, rows: Sequence[Sequence[Patch]], first_row: int) -> list[tuple[str, Callable]]:
    """One hook per patched name writing A's values into the batch rows that patch it."""
    by_name: dict[str, list[tuple[int, Patch]]] = {}
    for r, patches in enumerate(rows):
        for p in patches:
            by_name.setdefault(p.name, []).append((first_row + r, p))

    def make(name: str, entries: list[tuple[int, Patch]]) -> tuple[str, Callable]:
        a = pair.cache_a[name][0]                                   # (pos, d) or z: (pos, head, d_head)

        def fn(x: torch.Tensor, hook) -> torch.Tensor:
            if tuple(x.shape[1:]) != tuple(a.shape):
                raise ValueError(f"{name}: B's tensor has shape {tuple(x.shape[1:])}, A's {tuple(a.shape)}")
            x = x.clone()
            for r, p in entries:
                at = slice(None) if p.pos is None else p.pos
                if p.head is None:
                    x[r, at] = a[at]
                else:
                    x[r, at, p.head] = a[at, p.head]
            return x
        return name, fn
    return [make(n, e) for n, e in by_name.items()]


def check_patch(p: Patch, pair: Pair, names: Sequence[str]) -> None:
    if p.name not in names:
        raise ValueError(f"unknown capture name {p.name!r}")
    if p.name not in pair.cache_a:
        raise ValueError(f"{p.name} was not captured in A's run")
    shape = pair.cache_a[p.name].shape                               # (1, pos, ...)
    if p.pos is not None and not 0 <= p.pos < shape[1]:
        raise ValueError(f"position {p.pos} of {p.name} is out of range: positions are 0 … {shape[1] - 1}")
    if p.head is not None and (not p.name.endswith(".hook_z") or not 0 <= p.head < shape[2]):
        raise ValueError(f"head {p.head!r} can only be patched in a hook_z, heads 0 … {shape[-2] - 1}")


@torch.no_grad()
def patched_logits(hm, pair: Pair, rows: Sequence[Sequence[Patch]], chunk: int = CHUNK,
                   progress: Optional[Callable[[int, int], None]] = None,
                   at: Optional[tuple[int, int]] = None) -> torch.Tensor:
    """B's teacher-forced logits [len(rows), dec pos, vocab], row i with every Patch of rows[i] taken
    from A (an empty row is B itself). Batched `chunk` rows per forward. at=(a, b): only positions a … b - 1
    are projected onto the vocabulary, [len(rows), b - a, vocab] (a language model's prompt rows are most of a
    forward's projection, and none of them is scored)."""
    model = hm.model
    for patches in rows:
        for p in patches:
            check_patch(p, pair, model.hook_names)
    b = make_batch(hm.cfg, [pair.input_b]) if pair.input_b is not None else one_row(pair.src_b, pair.dec_b, pair.prefix_len)
    out = []
    for s in range(0, len(rows), chunk):
        part = rows[s:s + chunk]
        batch, where = b.expand(len(part)), None
        if at is not None:
            where = torch.zeros(len(part), (batch.src if hm.cfg.is_encoder_only else batch.dec).shape[1], dtype=torch.bool)
            where[:, at[0]:at[1]] = True
        logits = forward(model, batch, _row_hooks(pair, part, 0), logits_at=where)[0]
        out.append(logits if at is None else logits.view(len(part), at[1] - at[0], -1))
        if progress:
            progress(s + len(part), len(rows))
    return torch.cat(out) if out else torch.empty(0)


def output_logprob(hm, pair: Pair, logits: torch.Tensor, start: Optional[int] = None) -> torch.Tensor:
    """Summed log-probability of A's output under logits [B, dec pos, vocab] (or [dec pos, vocab]): [B]. start:
    the row of logits where A's output is scored (default pair.start; 0 for patched_logits(at=...)'s)."""
    logits = logits if logits.dim() == 3 else logits.unsqueeze(0)
    n = len(pair.labels)
    start = pair.start if start is None else start
    rows = logits[:, start:start + n].float()
    if pair.input_b is None:            # a decoder's output: under the decoding distribution; a blank: the head's own
        rows = allowed_logits(rows, never_generated(hm.tokenizer))
    logp = torch.log_softmax(rows, -1)                                            # (B, n, V)
    y = torch.tensor(pair.labels).expand(logits.shape[0], n).unsqueeze(-1)
    return logp.gather(-1, y).squeeze(-1).sum(-1)


def components(cfg, over: str, n_pos: int, part: Optional[str] = None) -> tuple[list[Patch], list[dict]]:
    """The Patch of every component for `over` and its table columns (same order)."""
    if over == "heads":
        heads = all_heads(cfg)
        return ([Patch(f"{p}.hook_z", head=h) for p, h in heads],
                [{"block": p, "layer": parse_prefix(p)[1], "head": h} for p, h in heads])
    if over == "blocks":
        prefixes = [block_prefix(b, i) for b in available_blocks(cfg) for i in range(n_layers(cfg, b))]
        return [Patch(f"{p}.hook_out") for p in prefixes], [{"block": p, "layer": parse_prefix(p)[1]} for p in prefixes]
    if over == "resid":
        names = resid_names(cfg, part)
        return ([Patch(n, pos=q) for n in names for q in range(n_pos)],
                [{"name": n, "layer": i, "pos": q} for i, n in enumerate(names) for q in range(n_pos)])
    raise ValueError(f"unknown component kind {over!r}; choose one of {', '.join(OVER)}")


def patching_scores(hm, text_a: str, text_b: str, over: str = "heads", part: Optional[str] = None,
                    pair: Optional[Pair] = None, progress: Optional[Callable[[int, int], None]] = None) -> pd.DataFrame:
    """One row per component (see the module docstring): its identifying columns, `logprob` (A's output
    under B with that component patched from A) and `score` ((logprob - B) / (A - B), NaN when A and B
    give A's output the same log-probability). df.attrs holds logprob_a, logprob_b, the two outputs and
    the aligned pieces. pair: a `prepare_pair(hm, text_a, text_b)` already made (it is reused)."""
    if over not in OVER:
        raise ValueError(f"unknown component kind {over!r}; choose one of {', '.join(OVER)}")
    pair = pair or prepare_pair(hm, text_a, text_b)
    part = part or resid_part(hm.cfg)
    n_pos = len(pair.src_a if part == "encoder" else pair.dec_a)
    patches, cols = components(hm.cfg, over, n_pos, part)
    at = (pair.start, pair.start + len(pair.labels))                 # the rows that score A's output
    lp = output_logprob(hm, pair, patched_logits(hm, pair, [[]] + [[p] for p in patches], progress=progress, at=at), 0)
    lp_a, lp_b = float(output_logprob(hm, pair, pair.logits_a)[0]), float(lp[0])
    gap = lp_a - lp_b
    df = pd.DataFrame(cols)
    df["logprob"] = lp[1:].tolist()
    df["score"] = [(x - lp_b) / gap if abs(gap) > 1e-6 else float("nan") for x in df["logprob"]]
    if over == "resid":
        pa, pb = ((pair.pieces_a, pair.pieces_b) if part == "encoder" or not hm.cfg.is_encoder_decoder
                  else (hm.tokenizer.pieces(pair.dec_a),) * 2)
        df["piece"] = [pa[q] if pa[q] == pb[q] else f"{pa[q]} / {pb[q]}" for q in df["pos"]]
    df.attrs.update(logprob_a=lp_a, logprob_b=lp_b, output_a=pair.output_a, output_b=pair.output_b,
                    pieces_a=pair.pieces_a, pieces_b=pair.pieces_b, part=part)
    return df


def score_grid(df: pd.DataFrame, over: str, block: Optional[str] = None) -> torch.Tensor:
    """The scores as a grid: heads -> [layer, head] of one block kind ("decoder.cross_attn"); blocks ->
    [layer, block kind] (NaN where a kind has no such layer); resid -> [layer, pos]."""
    if over == "heads":
        sub = df[[parse_prefix(p)[0] == block for p in df["block"]]]
        return per_head(sub, block, "score", int(sub["layer"].max()) + 1, int(sub["head"].max()) + 1)
    if over == "blocks":
        kinds = list(dict.fromkeys(parse_prefix(p)[0] for p in df["block"]))
        grid = torch.full((int(df["layer"].max()) + 1, len(kinds)), float("nan"))
        for p, s in zip(df["block"], df["score"]):
            kind, layer = parse_prefix(p)
            grid[layer, kinds.index(kind)] = float(s)
        return grid
    grid = torch.full((int(df["layer"].max()) + 1, int(df["pos"].max()) + 1), float("nan"))
    for layer, q, s in zip(df["layer"], df["pos"], df["score"]):
        grid[int(layer), int(q)] = float(s)
    return grid
