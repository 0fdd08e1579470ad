"""Concept checks in a live class (the questions: bank.py): the teacher puts the class on the check before the lesson
(each concept's form-a question) or after it (form b), one question at a time, and back on the lesson; every
page shows the bank question the class is on (votes.focus); the teacher's report of what the class learned
(gain.py) with its CSV and HTML downloads.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple, Optional

import streamlit as st

from viz_explorer.classroom import bank, gain, shared_reads
from viz_explorer.classroom import votes as cv
from viz_explorer.classroom.question import Question
from viz_explorer.classroom.refusals import say
from viz_explorer.kit import registry, widgets
from viz_explorer.kit.strings import current, t
from viz_explorer.server import cached

BUILT_IN = "concept-checks"
HALVES = {"pre": "a", "post": "b"}
BUILT_MAX = 512               # questions kept built (as_question): a bank of 28 in 2 languages is 56
RECHECK = shared_reads.FRESH  # s a built question is served before its files' times are read again (a few stat
                              # calls, which cost more than the rest of a student's poll on a busy server)
clock = time.monotonic


class _Built(NamedTuple):
    file: Path                       # the bank file it was read from
    checkpoint: Optional[Path]       # the bank's checkpoint, whose numbers it prints
    stamps: tuple[float, float]      # their times when it was built
    checked: float                   # clock() when the stamps were last found unchanged
    question: Question


_BUILT: dict[tuple, _Built] = {}     # (id, language) -> the question built


@cached.heavy                 # a Bank is frozen: shared, never copied
def _bank(name: str, stamp: float) -> bank.Bank:
    return bank.load_bank(name)


def _stamp(path: Path) -> float:
    """A file's modification time, 0.0 when there is none."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def load(name: str) -> bank.Bank:
    """A bank, read again when its file changes (ValueError: missing or broken, in one line)."""
    return _bank(name, _stamp(bank.folder() / f"{name}.json"))


@cached.heavy
def _facts(name: str, stamp: float, path: str, ckpt_stamp: float, text: str) -> dict:
    from viz_transformer.analysis import claims
    b = _bank(name, stamp)
    hm = cached.load_model(path, ckpt_stamp)
    return {key: claims.evaluate(spec["kind"], hm, text, {k: v for k, v in spec.items() if k != "kind"}).values
            for key, spec in bank.needs_facts(b).items()}


def _checkpoint(b: bank.Bank) -> Optional[Path]:
    """The shipped checkpoint the bank's numbers are computed on, None when it prints none (ValueError: not there)."""
    if not bank.needs_facts(b):
        return None
    from viz_explorer.server import defaults
    path = defaults.SHIPPED / b.checkpoint
    if not (path / "config.json").is_file():
        raise ValueError(f"the bank {b.name} computes its numbers on {b.checkpoint}, which is not in checkpoints/")
    return path


def facts(b: bank.Bank) -> dict:
    """The values the bank's questions print, computed on its checkpoint and text (ValueError: no such model)."""
    path = _checkpoint(b)
    if path is None:
        return {}
    return _facts(b.name, _stamp(bank.folder() / f"{b.name}.json"), str(path), cached.folder_stamp(path), b.text)


def find(question_id: str) -> Optional[tuple[bank.Bank, bank.Check]]:
    """bank.find with the bank read once per change of its file (every student's box asks every 3 s)."""
    return bank.find(question_id, load)


def as_question(question_id: str) -> Optional[Question]:
    """A class question (live_class.Question) from a bank question's class id; None for any other id or one that
    cannot be read now (the page says the bank's error). Built once per language and change of its bank's file or
    its checkpoint's: every student's box asks for it every few seconds."""
    parts = bank.split_id(question_id)
    if parts is None:
        return None
    file, key, now = bank.folder() / f"{parts[0]}.json", (question_id, current()), clock()
    got = _BUILT.get(key)
    if got is not None and got.file == file:
        if 0 <= now - got.checked < RECHECK:
            return got.question
        if (_stamp(file), cached.folder_stamp(got.checkpoint)) == got.stamps:
            _BUILT[key] = _Built(file=got.file, checkpoint=got.checkpoint, stamps=got.stamps, checked=now,
                                 question=got.question)
            return got.question
    file_stamp = _stamp(file)                                      # before the bank is read: a newer file is seen
    found = find(question_id)
    if found is None:
        return None
    b, q = found
    checkpoint = _checkpoint(b)
    checkpoint_stamp = cached.folder_stamp(checkpoint)             # before the facts: a newer file is never missed
    prompt, labels = bank.filled(b, q, facts(b), current())
    figure = t("ck.where", page=t(registry.spec(q.page).title), figure=widgets.md_escape(q.figure.get(current()) or
                                                                             next(iter(q.figure.values()))))
    built = Question(question_id, prompt, q.letters, tuple(f"{x}. {lab}" for x, lab in zip(q.letters, labels)),
                     q.letters[q.answer], letters=q.letters, where=figure)
    if len(_BUILT) >= BUILT_MAX:
        _BUILT.clear()
    _BUILT[key] = _Built(file, checkpoint, (file_stamp, checkpoint_stamp), now, built)
    return built


def _lists(b: bank.Bank) -> dict[str, list[bank.Check]]:
    """A bank's questions as the teacher walks them: the check before (form a), after (form b), the others."""
    return {k: qs for k, qs in (("pre", b.half("a")), ("post", b.half("b")), ("other", b.half(""))) if qs}


def position(focus: Optional[str]) -> Optional[tuple[str, int, int]]:
    """(which list: pre, post or other; the question's index in it; its length) of the bank question the class is
    on, None when it is on its lesson step or the bank cannot be read."""
    found = find(focus) if focus else None
    if found is None:
        return None
    b, q = found
    return next(((k, qs.index(q), len(qs)) for k, qs in _lists(b).items() if q in qs), None)


def panel(code: str, secret: str, focus: Optional[str]) -> None:
    """The teacher's question-bank controls: pick a bank, start its check before or after the lesson (or its other
    questions), walk them one at a time, back to the lesson."""
    names = bank.list_banks()
    found = find(focus) if focus else None
    with st.expander(t("ck.title"), icon=":material/quiz:", expanded=focus is not None):
        if not names:
            st.caption(t("ck.no_banks", folder=str(bank.folder())))
            return
        chosen = widgets.select(st, t("ck.bank"), names, key="lc_bank",
                                default=found[0].name if found else BUILT_IN)
        try:
            b = load(chosen)
        except ValueError as e:
            st.warning(t("ck.broken", error=str(e)), icon=":material/warning:")
            return
        lists = _lists(b)
        st.caption(t("ck.intro", n=len(b.half("a"))) if "pre" in lists else t("ck.intro_plain", n=len(b.questions)))
        on = next(((k, i) for k, qs in lists.items() for i, q in enumerate(qs) if b.class_id(q) == focus), None)
        for (k, qs), where in zip(lists.items(), st.columns(len(lists))):
            if where.button(t(f"ck.start.{k}"), key=f"lc_check_{k}", icon=":material/play_arrow:",
                            disabled=on is not None and on[0] == k):
                _focus(code, secret, b.class_id(qs[0]))
        if on is None:
            return
        k, i = on
        qs = lists[k]
        st.markdown(t("ck.on", half=t(f"ck.half.{k}"), i=i + 1, n=len(qs)))
        c1, c2, c3 = st.columns(3)
        if c1.button(t("ck.prev"), key="lc_check_prev", disabled=i == 0, icon=":material/chevron_left:"):
            _focus(code, secret, b.class_id(qs[i - 1]))
        if c2.button(t("ck.next"), key="lc_check_next", disabled=i + 1 >= len(qs), icon=":material/chevron_right:"):
            _focus(code, secret, b.class_id(qs[i + 1]))
        if c3.button(t("ck.back"), key="lc_check_back", icon=":material/school:"):
            _focus(code, secret, None)


def _focus(code: str, secret: str, question: Optional[str]) -> None:
    try:
        cv.set_focus(code, secret, question)
    except cv.ClassError as e:
        st.error(say(e))
        return
    st.rerun()


def answers_and_names(votes: list[dict], lesson_answer) -> tuple[dict, dict, dict]:
    """(question -> right choice or None, question or concept -> its name in the report, concept -> (before, after)
    question ids) for the questions the class voted on; a concept of a bank other than the built-in one is named
    BANK/CONCEPT. lesson_answer(question id) -> the lesson question's right option or None."""
    answers, names, banks = {}, {}, {}
    for qid in dict.fromkeys(v["question"] for v in votes):
        found = find(qid)
        if found is None:
            answers[qid], names[qid] = lesson_answer(qid), qid
            continue
        b, q = found
        banks[b.name] = b
        answers[qid] = q.letters[q.answer]
        names[qid] = f"{q.concept} ({q.form})" if q.form else q.id
    pairs = {}
    for b in banks.values():
        for a in b.half("a"):
            after = next(q for q in b.half("b") if q.concept == a.concept)   # parse_bank: every form a has its b
            concept = a.concept if b.name == BUILT_IN else f"{b.name}/{a.concept}"
            pairs[concept] = (b.class_id(a), b.class_id(after))
            answers.setdefault(b.class_id(a), a.letters[a.answer])
            answers.setdefault(b.class_id(after), after.letters[after.answer])
    return answers, names, pairs


def report(code: str, secret: str, lesson_answer) -> None:
    """The teacher's view of what the class learned, with the CSV and HTML downloads."""
    with st.expander(t("gn.title"), icon=":material/trending_up:"):
        try:
            votes = cv.class_votes(code, secret)
        except cv.ClassError as e:
            st.error(say(e))
            return
        if not votes:
            st.caption(t("gn.none"))
            return
        answers, names, pairs = answers_and_names(votes, lesson_answer)
        crows = gain.concept_rows(votes, pairs, answers)
        qrows = gain.question_rows(votes, answers)
        pre, post, g = gain.class_gain(crows)
        if pre.n:
            st.markdown(t("gn.class_gain", pre=_pct(pre), post=_pct(post), g="–" if g is None else f"{g:.2f}"))
        else:
            st.caption(t("gn.no_pairs"))
        if crows:
            st.dataframe([{t("gn.concept"): r.concept, t("gn.pre"): _pct(r.pre), t("gn.post"): _pct(r.post),
                           "g": "–" if r.g is None else f"{r.g:.2f}"} for r in crows], hide_index=True)
        if qrows:
            st.dataframe([{t("gn.question"): names.get(r.question, r.question), t("gn.first"): _pct(r.first),
                           t("gn.second"): _pct(r.second), t("gn.to_right"): r.moves.to_right,
                           t("gn.to_wrong"): r.moves.to_wrong} for r in qrows], hide_index=True)
        c1, c2 = st.columns(2)
        c1.download_button(t("gn.csv"), gain.csv_text(votes, answers, lambda n: t("gn.student", n=n)), file_name=f"class-{code}.csv",
                           mime="text/csv", key="lc_csv", icon=":material/download:")
        labels = {k: t(f"gn.{k}") for k in ("class", "concepts", "questions", "concept", "question", "pre", "post",
                                            "first", "second", "to_right", "to_wrong")} | {"lang": current()}
        page = gain.html_summary(t("gn.html_title", code=code), labels, qrows, crows, names)
        c2.download_button(t("gn.html"), page, file_name=f"class-{code}.html", mime="text/html", key="lc_html",
                           icon=":material/download:")


def _pct(s: gain.Share) -> str:
    return "–" if s.value is None else f"{100 * s.value:.0f}% ({s.right}/{s.n})"
