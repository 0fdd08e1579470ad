"""The confidence line under an output, and a warning when the output should not be trusted
(viz_transformer.analysis.confidence, with the thresholds calibrated into the checkpoint's meta.json)."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

import streamlit as st

from viz_explorer.kit.page_parts import md_escape
from viz_explorer.kit.strings import t
from viz_transformer.analysis import confidence as C


def of_run(hm, run, where=None, note: bool = True) -> C.Confidence:
    """Show the line (and the warning when flagged) for a captured run's output; returns the assessment.
    A text that was cut is not called long again: the page's notice above says so once (viz_explorer.kit.input_note)."""
    c = C.assess(hm, run)
    shown = replace(c, reasons=[r for r in c.reasons if r != "long_input"]) if run.n_cut else c
    show(hm, shown, where, note)
    return c


def of_trace(hm, text: str, trace, where=None) -> C.Confidence:
    """The same for a decoding trace's output (sampled or beam search: not the run's own output)."""
    ended = bool(trace.steps) and trace.steps[-1].token_id == trace.eos_id
    return show(hm, C.assess_ids(hm, text, trace.generated_ids, ended), where)


def line_text(c: C.Confidence) -> str:
    """'confidence: mean log-prob −0.21 (p≈0.81 per token) · 0 of 7 pieces rare' (+ the LM prompt's perplexity)."""
    if not c.n_tokens:
        s = t("cf.line_empty", rare=c.n_rare, n=c.n_pieces)
    else:
        s = t("cf.line", lp=_minus(c.mean_logprob), p=c.per_token, rare=c.n_rare, n=c.n_pieces)
    if c.prompt_ppl is not None:
        s += t("cf.line_ppl", ppl=c.prompt_ppl)
    if c.byte_chars:
        s += t("cf.line_bytes", k=len(c.byte_chars))
    return s


def _minus(x: float) -> str:
    return f"{x:.2f}".replace("-", "−")


def warning_text(hm, c: C.Confidence) -> str:
    """The plain-language note of a flagged output: why, and how flagged outputs score on the test split."""
    cal = hm.meta.get(C.KEY) or {}
    th = cal.get("thresholds", {})
    why = []
    for r in c.reasons:
        if r == "repetition":
            why.append(t("cf.why.repetition", gram=md_escape(c.repeat)))
        elif r == "unknown_characters":
            why += [t("cf.why.unknown_char", ch=md_escape(ch), n=n) for ch, n in c.byte_chars]
        elif r == "cut_off":
            why.append(t("cf.why.cut_off"))
        elif r == "classifier":
            why.append(t("cf.why.classifier", lp=_minus(c.mean_logprob), p=c.min_prob, score=c.score,
                         th=cal["classifier"]["threshold"]))
        elif r == "low_confidence":
            why.append(t("cf.why.low_confidence", lp=_minus(c.mean_logprob), tau=_minus(th["mean_logprob"])))
        elif r == "rare_input":
            why.append(t("cf.why.rare_input", rare=c.n_rare, n=c.n_pieces, unseen=c.n_unseen))
        elif r == "long_input":
            why.append(t("cf.why.long_input", n=c.n_pieces, longest=th["longest_input"]))
        elif r == "unusual_prompt":
            why.append(t("cf.why.unusual_prompt", ppl=c.prompt_ppl, th=th["prompt_ppl"]))
    s = t("cf.warn", why=t("cf.sep").join(why))
    test = cal.get("test")
    if test and test.get("confusion"):
        s += t("cf.test_catch", r=test["confusion"]["recall"], fa=test["confusion"]["false_alarms"])
    if test and test["flagged"]["bleu"] is not None and test["unflagged"]["bleu"] is not None:
        s += t("cf.test_bleu", f=test["flagged"]["bleu"], nf=test["flagged"]["n"],
                     u=test["unflagged"]["bleu"], nu=test["unflagged"]["n"])
    elif cal.get("val") and "unflagged" not in cal["val"]:
        s += t("cf.val_lm", f=cal["val"]["flagged"]["n"], n=cal["val"]["all"]["n"])
    return s


def show(hm, c: C.Confidence, where=None, note: bool = True) -> C.Confidence:
    where = where if where is not None else st
    where.caption(line_text(c) + ("" if c.calibrated else t("cf.uncalibrated")), help=t("cf.help"))
    if c.flagged and note:
        where.warning(warning_text(hm, c), icon=":material/report:")
    return c


def architecture_verdict(hm, c: C.Confidence) -> Optional[str]:
    """Compare architectures: when a model should not be trusted on this sentence, say whether it is
    weak in general (its test BLEU under 20, 'the gist is hard to get') or only unsure here."""
    if not c.flagged:
        return None
    bleu = (hm.meta.get("test") or {}).get("bleu")
    epochs = (hm.meta.get("train_config") or {}).get("epochs")
    if bleu is not None and not math.isnan(bleu) and bleu < 20:
        return t("ar.trust.weak", bleu=bleu, epochs=epochs if epochs is not None else "?")
    return t("ar.trust.unsure", bleu=bleu if bleu is not None else "?")
