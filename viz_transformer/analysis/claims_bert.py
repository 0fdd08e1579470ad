"""Lesson facts about a masked LM (BERT): its [CLS] … [SEP] input, the blank's fill, the head that reads after the
blank, a translation beside it, the lens layer where the answer appears. Registered in fact_core.KINDS (claims
imports this module)."""
from __future__ import annotations

import torch

from viz_transformer.analysis import patterns
from viz_transformer.analysis.fact_core import Fact, kind, shared_run, strip_mark


RIGHT_SHARE = 0.3     # "reads the pieces after the blank": at least this share of the [MASK] row on them


def _blank(hm, run) -> int:
    """The first [MASK]'s position in an encoder-only run; ValueError in one line when there is none."""
    from viz_transformer.run.fill_mask import mask_positions
    where = mask_positions(hm, run)
    if not where:
        raise ValueError(f"this fact needs a masked LM and a text with {getattr(hm.tokenizer, 'mask_token', None) or '[MASK]'}")
    return where[0]


def _fill(hm, text: str) -> tuple[list[str], list[float]]:
    """The masked-LM head's 5 best pieces at the text's first blank, and their probabilities."""
    run = shared_run(hm, text)
    probs = torch.softmax(run.logits[_blank(hm, run)].float(), -1)
    p, ids = probs.topk(5)
    return hm.tokenizer.pieces(ids.tolist()), p.tolist()


@kind
def bert_pieces(hm, text: str) -> Fact:
    """An encoder-only model's input: [CLS] first, [SEP] last (and after the first sentence of a pair), the
    blank one piece among them."""
    run = shared_run(hm, text)
    p = run.src_pieces
    blank = _blank(hm, run)
    holds = p[0] == "[CLS]" and p[-1] == "[SEP]" and p[blank] == "[MASK]"
    return Fact({"n": len(p), "pieces": " ".join(p), "blank": blank, "seps": p.count("[SEP]")}, holds,
                "the input starts with [CLS], ends with [SEP] and holds the [MASK]")


@kind
def blank_fill(hm, text: str, expects: str, within: int = 1) -> Fact:
    """The model's best pieces for the first blank. Claim: `expects` is among the `within` best."""
    top, p = _fill(hm, text)
    bare = [strip_mark(x) for x in top]
    rank = bare.index(strip_mark(expects)) + 1 if strip_mark(expects) in bare else 0
    return Fact({"top": top[0], "p": p[0], "top5": " · ".join(top), "rank": rank,
                 "p_expects": p[rank - 1] if rank else 0.0}, 1 <= rank <= within,
                f"{expects} is among the model's {within} best pieces for the blank")


@kind
def blank_reads_both_ways(hm, text: str) -> Fact:
    """Selector: the encoder head whose [MASK] row puts the largest share of its weight on the pieces after the
    blank (the closing [SEP] left out). Claim: that share is at least RIGHT_SHARE, which a causal decoder's row
    could never give (it sees no piece after itself)."""
    run = shared_run(hm, text)
    blank = _blank(hm, run)
    pats = patterns.block_patterns(run.cache, "encoder.self_attn")[:, :, blank]        # (layer, head, key)
    after = pats[:, :, blank + 1:len(run.src_pieces) - 1].sum(-1)
    before = pats[:, :, 1:blank].sum(-1)
    layer, head = divmod(int(after.argmax()), after.shape[1])
    return Fact({"layer": layer, "head": head, "after": float(after[layer, head]), "before": float(before[layer, head]),
                 "heads": after.numel(), "reading": int((after >= RIGHT_SHARE).sum())},
                float(after[layer, head]) >= RIGHT_SHARE,
                f"some encoder head's [MASK] row puts ≥ {RIGHT_SHARE} on the pieces after the blank")


@kind
def pair_helps(hm, text: str, expects: str) -> Fact:
    """A sentence pair "A [SEP] B" whose A holds a blank: the blank read in A alone and with B beside it. Claim: B
    (a translation, say) raises the probability of `expects` there."""
    split = getattr(hm.tokenizer, "split_pair", None)
    alone_text, pair = split(text) if split else (text, None)
    if pair is None:
        raise ValueError(f"pair_helps needs a text of two sentences, \"A {getattr(hm.tokenizer, 'sep_token', None) or '[SEP]'} B\"")
    eid = [i for i in hm.tokenizer.encode(expects) if hm.tokenizer.pieces([i])[0] not in ("\u2581", "")][:1]
    if not eid:
        raise ValueError(f"{expects!r} is no piece of this model")
    p = [float(torch.softmax(r.logits[_blank(hm, r)].float(), -1)[eid[0]])
         for r in (shared_run(hm, alone_text), shared_run(hm, text))]
    top = [_fill(hm, t)[0][0] for t in (alone_text, text)]
    return Fact({"top_alone": top[0], "p_alone": p[0], "top_pair": top[1], "p_pair": p[1], "pair": pair,
                 "alone": alone_text}, p[1] > p[0],
                f"with the second sentence beside it, {expects} gets more probability at the blank")


@kind
def fill_lens_first(hm, text: str) -> Fact:
    """The masked-LM head read after every layer at the first blank (run.fill_mask): the first layer after which
    its best piece is the model's final answer and stays so. Claim: that is after some layer, not at the
    embeddings."""
    from viz_transformer.run.fill_mask import fill_blanks
    b = fill_blanks(hm, shared_run(hm, text), k=1)[0]
    final = b.top[0][0]
    rows = [r[0][0] for r in b.layers]                  # embeddings, then after each layer
    first = next((i for i in range(len(rows)) if all(x == final for x in rows[i:])), None)
    return Fact({"piece": final, "layer": first if first is not None else -1, "layers": len(rows) - 1,
                 "p": b.top[0][1]}, first is not None and first >= 1,
                "the blank's answer appears after some layer, not at the embeddings")
