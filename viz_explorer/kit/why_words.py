"""What "Why this attention" says, in the interface's language, computed from analysis.why_attention: the part
groups' names, the one-sentence reading of a score and of a logit. User text (pieces) is escaped for markdown."""
from __future__ import annotations

from typing import Optional

from viz_explorer.kit.page_parts import md_escape
from viz_explorer.kit.strings import t
from viz_transformer.analysis import why_attention as why

TOP_HEADS = 3          # heads named in the logit's sentence


def group_label(group: str) -> str:
    """A part group's name ("word", "layer 2", why.EXTRA) in the interface's language."""
    if group.startswith("layer "):
        return t("wy.g.layer", layer=int(group.split()[1]))
    return t("wy.g.extra") if group == why.EXTRA else t(f"wy.g.{group}")


def score_story(hm, terms, query: str, key: str) -> str:
    """The score's largest group term in words, and what the positions add (or how they act, where they are no
    part: RoPE, T5's bias)."""
    s = why.story(terms)
    if (s.query_group, s.key_group) == ("word", "word"):
        first = t("wy.story.word", qp=md_escape(query), kp=md_escape(key), value=s.value, score=s.score)
    else:
        first = t("wy.story.pair", qg=group_label(s.query_group), kg=group_label(s.key_group), value=s.value,
                  score=s.score)
    if hm.cfg.positional == "rope":
        second = t("wy.story.rope")
    elif terms.extra:
        second = t("wy.story.relative", extra=s.extra)
    else:
        second = t("wy.story.position", position=s.position)
    return f"{first} {second}"


def logit_rows(rows) -> list[str]:
    """The logit grid's row names: a layer's self- or cross-attention."""
    return [t(f"wy.grid_{kind}", layer=layer) for layer, kind in rows]


def _head_name(layer: int, kind: str, head: int) -> str:
    return t(f"wy.head_{kind}", layer=layer, head=head)


def logit_story(lt, vs, rows, values, piece: str, rival: Optional[str]) -> str:
    """The heads with the largest direct push on the logit (values: the grid the page draws, [rows, heads], against a
    rival token the difference), and the parts' sum beside the model's own logit."""
    n_heads = values.shape[1]
    order = values.flatten().argsort(descending=True)[:TOP_HEADS].tolist()
    heads = ", ".join(f"{_head_name(*rows[i // n_heads], i % n_heads)} ({float(values.flatten()[i]):+.2f})"
                      for i in order)
    if vs is None:
        return t("wy.logit_story", piece=md_escape(piece), heads=heads, total=lt.total(), logit=lt.logit)
    return t("wy.logit_story_vs", piece=md_escape(piece), other=md_escape(rival or ""), heads=heads,
             total=lt.total() - vs.total(), logit=lt.logit - vs.logit)
