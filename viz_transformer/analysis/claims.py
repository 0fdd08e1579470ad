"""What a lesson says about the model, computed from the model: each kind of fact returns the numbers a
note fills in and whether the lesson's claim holds (a qualitative test with a stated threshold).

    fact = evaluate("cross_alignment", hm, "我是一名工程师。", {"predicts": "▁engineer", "source": "工程师"})
    fact.values["layer"], fact.values["head"], fact.holds     # the head that aligns them, found in this model

Selectors ("the head whose row ... puts most weight on ...") live here too, so a lesson step opens the
head this model really has; a retrained checkpoint that breaks a claim makes `holds` False (CI fails). This module
holds the kinds about attention, decoding and order; importing it registers those of claims_stack.py and
claims_bert.py too (the registry and Fact: fact_core.py).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from viz_transformer.analysis import alignment
from viz_transformer.analysis import patterns
from viz_transformer.analysis import attention_maths
from viz_transformer.analysis import mask_examples
from viz_transformer.analysis import piece_labels
from viz_transformer.run import lenses
from viz_transformer.run import patching
from viz_transformer.run import permute
from viz_transformer.core.encoding import encode_input
from viz_transformer.core.tokenizer import source_pieces
from viz_transformer.run.interventions import positions_off_hooks
from viz_transformer.analysis.fact_core import KINDS, STRONG, Fact, evaluate, kind, shared_run, strip_mark  # noqa: F401
from viz_transformer.analysis import claims_bert, claims_stack  # noqa: F401  (registers their kinds)

GAP_NONE = 1e-3       # order test: "the same set of vectors" (float32 noise is ~1e-6)
GAP_LARGE = 0.1       # order test: "a large gap"
PARTIAL = 0.9         # patching: "one position restores only part of it"


def _words(pieces: list[str]) -> list[str]:
    return [p for p in pieces if p not in ("[begin]", "[end]", "[sep]", "[pad]")]


def next_piece(run, row: int) -> str:
    """What decoder row `row` predicts: the next decoder input, or for the last row the greedy trace's
    final token ([end] when it ended)."""
    if row + 1 < len(run.tgt_pieces):
        return run.tgt_pieces[row + 1]
    return run.trace.steps[-1].piece if run.trace is not None and run.trace.steps else ""


def predicting_row(run, piece: str) -> int:
    """The decoder row (query position) whose step predicts `piece`: the row before it. ValueError
    when the output has no such piece."""
    for r in range(run.prompt_len - 1, len(run.tgt_pieces)):
        if next_piece(run, r) == piece:
            return r
    raise ValueError(f"the output {run.output!r} has no piece {piece!r}")


# -- the pieces and the computation --------------------------------------------------------------------
@kind
def pieces(hm, text: str) -> Fact:
    """The text's pieces and the output; the encoder input ends with [end], the decoder starts at [begin]."""
    run = shared_run(hm, text)
    src = run.src_pieces if run.src_pieces is not None else run.tgt_pieces[:run.prompt_len]
    holds = run.tgt_pieces[0] == "[begin]" and (run.src_pieces is None or run.src_pieces[-1] == "[end]")
    return Fact({"pieces": " ".join(_words(src)), "n": len(_words(src)), "output": run.output}, holds,
                "the encoder reads the pieces + [end]; the decoder starts from [begin]")


@kind
def head_size(hm, text: str) -> Fact:
    cfg = hm.cfg
    return Fact({"d_model": cfg.d_model, "n_heads": cfg.n_heads, "d_head": cfg.d_head},
                cfg.n_heads * cfg.d_head == cfg.d_model, "each head's Q, K, V is one d_model/n_heads slice")


@kind
def divisor_sharpens(hm, text: str, block: str, layer: int, head: int, row: int) -> Fact:
    """A smaller divisor sharpens the row (lower entropy), a larger one flattens it."""
    run = shared_run(hm, text)
    q, k, v, mask = patterns.head_qkv(run.cache, block, layer, head)
    d = math.sqrt(hm.cfg.d_head)
    h = [attention_maths.entropy(attention_maths.attention_steps(q, k, v, mask, x).weights[row]) for x in (d / 4, d, 4 * d)]
    return Fact({"sqrt_dk": d, "low": d / 4, "high": 4 * d, "input": piece_labels.block_pieces(run, block)[0][row],
                 "sharp": h[0], "model": h[1], "flat": h[2],
                 "uniform": attention_maths.uniform_entropy(mask[row])}, h[0] < h[1] < h[2],
                "dividing by less sharpens the row (entropy falls), by more flattens it (entropy rises)")


@kind
def decoder_row(hm, text: str, block: str, layer: int, head: int, row: int) -> Fact:
    """Decoder row `row` reads one piece and predicts the next; it may use the keys up to itself only."""
    run = shared_run(hm, text)
    w = run.cache[patterns.hook_name(block, layer, "hook_pattern")][0, head, row]
    mask = run.cache[patterns.hook_name(block, layer, "hook_mask")][0, 0, row]
    allowed = int(mask.sum())
    ahead = float(w[row + 1:].abs().max()) if row + 1 < len(w) else 0.0
    holds = allowed == row + 1 and ahead == 0.0 and abs(float(w.sum()) - 1) < 1e-5
    return Fact({"row": row, "input": run.tgt_pieces[row], "predicts": next_piece(run, row), "allowed": allowed,
                 "masked": len(w) - allowed, "uniform": attention_maths.uniform_entropy(mask)}, holds,
                "the row sees only the pieces up to itself (weight 0 after it) and its weights add up to 1")


@kind
def cross_alignment(hm, text: str, predicts: str, source: str) -> Fact:
    """Selector: the cross-attention head whose row for the step predicting `predicts` puts the most
    weight on the pieces of the source word `source` (together). Claim: that weight is at least STRONG,
    and the row whose input is `predicts` (the step after) puts less than half as much there."""
    run = shared_run(hm, text)
    r = predicting_row(run, predicts)
    span = alignment.source_span(run.src_pieces, source)
    on_word = patterns.block_patterns(run.cache, "decoder.cross_attn")[:, :, :, span.start:span.stop].sum(-1)
    grid = on_word[:, :, r]                                                              # (layer, head)
    layer, head = divmod(int(grid.argmax()), grid.shape[1])
    weight = float(grid[layer, head])
    own = float(on_word[layer, head, r + 1]) if r + 1 < len(run.tgt_pieces) else 0.0
    return Fact({"layer": layer, "head": head, "input": run.tgt_pieces[r], "predicts": predicts, "row": r,
                 "source": " ".join(run.src_pieces[i] for i in span), "weight": weight, "own": own,
                 "own_predicts": next_piece(run, r + 1), "strong": int((grid >= STRONG).sum()),
                 "heads": grid.numel()}, weight >= STRONG and own < weight / 2,
                f"the row predicting {predicts} puts ≥ {STRONG} on {source}; the {predicts} row less than half that")


@kind
def word_alignment(hm, text: str, targets: str, sources: str) -> Fact:
    """For each target piece and its source word, matched in order from two space-separated lists
    ("▁I ▁an", "我 一名"): the cross-attention heads whose row for the step predicting that piece gives its
    largest weight to a piece of the source word, and the strongest of them. Claim: every target piece has
    at least one such head."""
    pairs = dict(zip(targets.split(), sources.split(), strict=True))
    run = shared_run(hm, text)
    cross = patterns.block_patterns(run.cache, "decoder.cross_attn")                    # (layer, head, q, k)
    rows, found = [], True
    for target, source in pairs.items():
        r = predicting_row(run, target)
        heads = alignment.aligned_heads(cross[:, :, r], alignment.source_span(run.src_pieces, source))
        found = found and bool(heads)
        best = heads[0] if heads else None
        rows.append({"target": target, "source": source, "row": r, "heads": len(heads),
                     "layer": best.layer if best else None, "head": best.head if best else None,
                     "weight": best.weight if best else 0.0})
    table = " · ".join(f"{strip_mark(x['target'])} ← {x['source']} ({x['heads']})" for x in rows)
    return Fact({"rows": rows, "table": table, "heads": cross.shape[0] * cross.shape[1]}, found,
                "each target piece has a cross-attention head whose largest weight is on its source word")


@kind
def greedy_steps(hm, text: str) -> Fact:
    """Greedy decoding: every step takes the most likely candidate, and the output ends with [end]."""
    tr = shared_run(hm, text).trace
    best = all(s.candidates[0].id == s.token_id and all(s.prob >= c.prob - 1e-6 for c in s.candidates)
               for s in tr.steps)
    return Fact({"steps": len(tr.steps), "last": tr.steps[-1].piece}, best and tr.steps[-1].piece == "[end]",
                "each step picks the most likely piece; the last step picks [end]")


def sequence_logp(hm, text: str, out_ids: list[int]) -> float:
    """log p(out_ids | text), the output's ids ([end] included) teacher-forced in one forward: the sum of each
    piece's log-probability where the decoder predicts it. Independent of how a search found the output."""
    from viz_transformer.core.batch import forward, make_batch
    inp = encode_input(hm.tokenizer, hm.cfg, text, reserve=len(out_ids))
    logits, _ = forward(hm.model, make_batch(hm.cfg, [inp], [out_ids]))
    logp = torch.log_softmax(logits[0].float(), -1)
    first = len(inp.prompt) - 1                                # the row that predicts the first output piece
    return float(sum(logp[first + i, t] for i, t in enumerate(out_ids)))


@kind
def beam_vs_greedy(hm, text: str, width: int = 4) -> Fact:
    """Greedy decoding against beam search of `width`, each output scored by sequence_logp. Claim: beam search's
    output is at least as likely as greedy's (it keeps `width` candidates, so it can find a likelier one)."""
    from viz_transformer.run.decode_settings import DecodeSettings
    from viz_transformer.run.decoding import decode
    greedy = shared_run(hm, text).trace
    beam = decode(hm, text, DecodeSettings("beam", beam_width=width))
    g, b = sequence_logp(hm, text, greedy.output_ids), sequence_logp(hm, text, beam.output_ids)
    return Fact({"greedy": hm.tokenizer.decode(greedy.generated_ids), "beam": hm.tokenizer.decode(beam.generated_ids),
                 "greedy_logp": g, "beam_logp": b, "same": int(greedy.output_ids == beam.output_ids),
                 "width": width}, b >= g - 1e-4,
                f"beam search ({width}) finds an output at least as likely as greedy decoding's")


@kind
def lens_first(hm, text: str, predicts: str) -> Fact:
    """The logit lens at the step predicting `predicts`: the first layer after which it is the top token
    (not the embeddings), and its probability there and after the last layer (≥ STRONG)."""
    run = shared_run(hm, text)
    r = predicting_row(run, predicts)
    lp = lenses.logit_lens(hm, run)                                     # (rows, pos, vocab)
    tid = run.tgt_ids[r + 1] if r + 1 < len(run.tgt_ids) else run.trace.steps[-1].token_id
    top = [int(lp[i, r].argmax()) == tid for i in range(lp.shape[0])]
    first = next((i for i in range(lp.shape[0]) if all(top[i:])), None)
    p = lp[:, r, tid].exp()
    return Fact({"step": r - run.prompt_len + 2, "input": run.tgt_pieces[r], "predicts": predicts,
                 "layer": (first or 1) - 1,
                 "p_first": float(p[first or 0]), "p_final": float(p[-1])},
                first is not None and first >= 1 and float(p[-1]) >= STRONG,
                f"{predicts} becomes the top token after some layer (not at the embeddings) and ends ≥ {STRONG}")


# -- order: a pair of texts, positions, masks ---------------------------------------------------------
@kind
def reordered_pair(hm, text: str, other: str) -> Fact:
    """Two texts cut into the same pieces in another order (two of them changed places), translated
    differently."""
    a, b = (shared_run(hm, x) for x in (text, other))
    pa, pb = (_words(r.src_pieces if r.src_pieces is not None else r.tgt_pieces[:r.prompt_len]) for r in (a, b))
    moved = [i for i, (x, y) in enumerate(zip(pa, pb)) if x != y]
    holds = sorted(pa) == sorted(pb) and len(moved) == 2 and a.output != b.output
    return Fact({"pieces": " ".join(pa), "other_pieces": " ".join(pb), "n": len(pa),
                 "moved": " / ".join(pa[i] for i in moved), "output": a.output, "other_output": b.output}, holds,
                "the same pieces, two of them swapped, translated differently")


@kind
def positional_near(hm, text: str, near: int = 1, far: int = 16) -> Fact:
    """The model's positional vectors: neighbours are more alike (cosine) than positions `far` apart."""
    pos = hm.model.src_embed.pos if hm.cfg.is_encoder_decoder else hm.model.embed.pos
    pe = pos.matrix().detach().float()[:64]
    pe = pe / pe.norm(dim=-1, keepdim=True)
    cos = [float((pe[:-k] * pe[k:]).sum(-1).mean()) for k in (near, far)]
    return Fact({"near": cos[0], "far": cos[1]}, cos[0] > cos[1] + GAP_LARGE,
                f"positions {near} apart are more alike than positions {far} apart")


@kind
def order_test(hm, text: str, how: str = "swap", other: Optional[str] = None, max_new_tokens: int = 24) -> Fact:
    """permute.order_test with positions on and off. An encoder without positions gives the same set of
    vectors (gap < GAP_NONE), with them a large gap; a causal decoder keeps a large gap even without.
    `other`: the permuted pieces are exactly that text's pieces."""
    on = permute.order_test(hm, text, how, max_new_tokens=max_new_tokens)
    off = permute.order_test(hm, text, how, fwd_hooks=positions_off_hooks(hm), max_new_tokens=max_new_tokens)
    if on.part == "encoder":
        holds = off.gap < GAP_NONE and on.gap > GAP_LARGE
    else:
        holds = off.gap > GAP_LARGE
    if other is not None:
        enc = encode_input(hm.tokenizer, hm.cfg, other)
        holds = holds and on.permuted_pieces == source_pieces(hm.tokenizer, enc.ids)
    return Fact({"gap_on": on.gap, "gap_off": off.gap, "permuted": " ".join(_words(on.permuted_pieces)),
                 "output": on.permuted_output, "output_off": off.permuted_output}, holds,
                "encoder: gap ≈ 0 without positions and large with them; causal decoder: large even without")


@kind
def compare_cell(hm, text: str, other: str, block: str, layer: int, head: int) -> Fact:
    """Where one head's patterns for two aligned texts differ most: a row or a column of a moved piece."""
    a, b = (shared_run(hm, x) for x in (text, other))
    pa, pb = piece_labels.block_pieces(a, block), piece_labels.block_pieces(b, block)
    d = (patterns.block_patterns(a.cache, block)[layer, head] - patterns.block_patterns(b.cache, block)[layer, head]).abs()
    q, k = divmod(int(d.argmax()), d.shape[1])
    moved_q = {i for i, (x, y) in enumerate(zip(pa[0], pb[0])) if x != y}
    moved_k = {i for i, (x, y) in enumerate(zip(pa[1], pb[1])) if x != y}
    return Fact({"diff": float(d[q, k]), "row": f"{pa[0][q]} / {pb[0][q]}", "col": f"{pa[1][k]} / {pb[1][k]}"},
                q in moved_q or k in moved_k, "the largest difference is in a row or a column of a moved piece")


@kind
def patching_resid(hm, text: str, other: str) -> Fact:
    """Residual-stream patching from text into other: the two positions where one patched cell changes the
    output most (the largest |score|: restoring it, or making it worse) are the moved pieces, and no single
    cell restores all of it (best < PARTIAL). `worst` is the lowest score: a moved piece patched alone can
    leave a sentence with the same word twice."""
    df = patching.patching_scores(hm, text, other, "resid")
    best = df.loc[df["score"].idxmax()]
    by_pos = df["score"].abs().groupby(df["pos"]).max().sort_values(ascending=False)
    moved = {i for i, (x, y) in enumerate(zip(df.attrs["pieces_a"], df.attrs["pieces_b"])) if x != y}
    layer = patching.resid_layer(int(best["layer"]))
    return Fact({"score": float(best["score"]), "pos": int(best["pos"]), "piece": best["piece"],
                 "moved": " / ".join(df.attrs["pieces_a"][i] for i in sorted(moved)),
                 "layer": -1 if layer is None else layer, "output": df.attrs["output_a"],
                 "worst": float(df["score"].min())},
                set(by_pos.index[:len(moved)]) == moved and layer is not None and float(best["score"]) < PARTIAL,
                f"patching the moved positions changes the output most; the best single cell (after a layer) "
                f"restores < {PARTIAL}")


@kind
def prefix_layout(hm, text: str) -> Fact:
    """How a prefix LM lays the sentence out (mask_examples.prefix_lm_layout): [begin] + source + [sep] is
    the prefix, the target follows."""
    run = shared_run(hm, text)
    seq, p = mask_examples.prefix_lm_layout(run)
    src = _words(run.src_pieces) if run.src_pieces is not None else _words(run.tgt_pieces[:run.prompt_len])
    holds = seq[0] == "[begin]" and seq[p - 1] == "[sep]" and seq[1:p - 1] == src
    return Fact({"prefix": p, "n": len(seq), "target": len(seq) - p}, holds,
                "the prefix is [begin] + the source pieces + [sep]")


@kind
def one_sequence(hm, text: str, sees_ahead: bool) -> Fact:
    """A one-sequence translator's layout: [begin] source [sep] (the prompt) then the target, in one sequence, and
    whether a prompt row may attend to prompt pieces after it (read from the mask its first layer applied). Claim:
    it may (a prefix LM) or may not (decoder-only), as `sees_ahead` says."""
    run = shared_run(hm, text)
    if run.src_pieces is not None or hm.cfg.is_encoder_only:
        raise ValueError("one_sequence is for decoder-only and prefix-LM translators")
    mask = run.cache[f"decoder.0.self_attn.hook_mask"][0, 0]
    P = run.prompt_len
    ahead = bool(torch.triu(mask[:P, :P].bool(), diagonal=1).any())
    return Fact({"n": len(run.tgt_pieces), "prompt": P, "target": len(run.tgt_pieces) - P, "output": run.output},
                ahead == sees_ahead, f"the prompt's rows {'may' if sees_ahead else 'may not'} see the prompt after them")


@kind
def test_score(hm, text: str) -> Fact:
    """The held-out test score meta.json records (BLEU and chrF, greedy, on the source-disjoint test split), and the
    parameter count. Claim: the record has them."""
    test = (hm.meta or {}).get("test") or {}
    n = sum(p.numel() for p in hm.model.parameters())
    ok = isinstance(test.get("bleu"), (int, float)) and isinstance(test.get("chrf"), (int, float))
    return Fact({"bleu": test.get("bleu", 0.0), "chrf": test.get("chrf", 0.0), "n": test.get("n", 0),
                 "params": n / 1e6}, ok, "meta.json records the test BLEU and chrF")


@kind
def causal_everywhere(hm, text: str) -> Fact:
    """Every decoder self-attention head of every layer puts weight 0 after the diagonal."""
    run = shared_run(hm, text)
    pats = patterns.block_patterns(run.cache, "decoder.self_attn")              # (layer, head, q, k)
    above = float(torch.triu(pats, diagonal=1).abs().max())
    return Fact({"heads": pats.shape[0] * pats.shape[1], "above": above}, above == 0.0,
                "no decoder self-attention head puts any weight after the diagonal")
