"""A lesson step's question at the top of the page: the student picks an answer (a click on a key cell or a
pill), then "Reveal" shows the model's answer with its evidence highlighted. viz_transformer.analysis.questions
computes options, answer and evidence; this module only lays them out.

A live class registers into `on_answer`: each callable gets (question_id, options, choice) whenever a student
answers, with the language-independent option ids of analysis.questions. The answer widget runs in an
@st.fragment, so answering reruns the question only, not the page below it.

Session state: STATE ("quiz") maps question_id(lesson, step) to {"choice": option id or None, "revealed": bool};
the pills' key is f"qz_pick_{question_id}".
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Callable

import streamlit as st

from viz_explorer.kit import screen, widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis.questions import NO, ROLES, SOURCES, YES, Question
from viz_transformer.plots import attribution_figures, charts
from viz_transformer.plots import question_figures as figures

on_answer: list[Callable[[str, list[str], str], None]] = []     # the class feature registers here
STATE = "quiz"
log = logging.getLogger(__name__)


def question_id(lesson_name: str, step_index: int) -> str:
    """The id of the question of step `step_index` (0-based) of a lesson: "lesson-name/3" (1-based step)."""
    return f"{lesson_name}/{step_index + 1}"


def _pick_key(qid: str) -> str:
    return f"qz_pick_{qid}"


def state(qid: str) -> dict:
    """The student's {"choice", "revealed"} for a question (a fresh one for anything a stale session holds)."""
    store = st.session_state.get(STATE)
    if not isinstance(store, dict):
        st.session_state[STATE] = store = {}
    entry = store.get(qid)
    if not isinstance(entry, dict) or set(entry) != {"choice", "revealed"}:
        store[qid] = entry = {"choice": None, "revealed": False}
    return entry


def answer(qid: str, options: list[str], choice) -> None:
    """Record the student's choice (an option id; anything else is ignored) and tell every on_answer hook.
    A failing hook is logged, never shown to the student."""
    entry = state(qid)
    if choice not in options or entry["revealed"]:
        return
    entry["choice"] = choice
    for hook in list(on_answer):
        try:
            hook(qid, list(options), choice)
        except Exception:                                       # noqa: BLE001  (another feature's bug)
            log.exception("on_answer hook %r failed for %s", hook, qid)


def _picked(qid: str, options: list[str]) -> None:
    choice = st.session_state.get(_pick_key(qid))
    if choice is None and not state(qid)["revealed"]:
        state(qid)["choice"] = None                             # the pill clicked again: no answer yet
    answer(qid, options, choice)


def _clicked(qid: str, options: list[str], key: str) -> None:
    """A click on a key cell of the row figure: the same answer as the pill of that key."""
    points = st.session_state[key].selection.points
    cols = [p["customdata"] for p in points if p.get("customdata") is not None]
    if cols and not state(qid)["revealed"]:
        choice = next((o for o in options if o.split(":", 1)[0] == str(int(cols[0]))), None)
        if choice is not None:
            st.session_state[_pick_key(qid)] = choice
            answer(qid, options, choice)


def _reveal(qid: str) -> None:
    if state(qid)["choice"] is not None:
        state(qid)["revealed"] = True


def _again(qid: str) -> None:
    st.session_state[STATE][qid] = {"choice": None, "revealed": False}
    st.session_state.pop(_pick_key(qid), None)


def option_label(option: str) -> str:
    """An option id as the student reads it: yes/no and role names translated, pieces as they are."""
    if option in (YES, NO):
        return t(f"qz.{option}")
    if option in SOURCES:
        return t(f"qz.src.{option}")
    return t(f"qz.role.{option}") if option in ROLES else option


def show(qid: str, q: Question, prompt: str) -> None:
    """The question box (call it at the top of the main area)."""
    with st.container(border=True, key="lesson_question"):
        _ask(qid, q, prompt)


@st.fragment
@screen.laid_out
def _ask(qid: str, q: Question, prompt: str) -> None:
    entry = state(qid)
    st.markdown(f"**{t('qz.title')}** · {prompt}")
    if _pick_key(qid) not in st.session_state and entry["choice"] in q.options:
        st.session_state[_pick_key(qid)] = entry["choice"]      # the pick survives a visit to another step
    _context(qid, q, entry)
    st.pills(t("qz.pick"), q.options, format_func=in_language(option_label), key=_pick_key(qid), on_change=_picked,
             args=(qid, q.options), disabled=entry["revealed"])
    row = st.container(horizontal=True)
    row.button(t("qz.reveal"), key=f"qz_reveal_{qid}", on_click=_reveal, args=(qid,), type="primary",
               disabled=entry["choice"] is None or entry["revealed"], icon=":material/visibility:")
    if entry["revealed"]:
        row.button(t("qz.again"), key=f"qz_again_{qid}", on_click=_again, args=(qid,), icon=":material/replay:")
        _verdict(q, entry["choice"])
        _evidence(qid, q, entry["choice"])
    elif entry["choice"] is None:
        st.caption(t("qz.hint"))


def _context(qid: str, q: Question, entry: dict) -> None:
    """What the student needs to answer: the key row to click, the output so far, the output with the head."""
    ev = q.evidence
    if q.kind == "argmax_key" and not entry["revealed"]:
        picked = next((i for i, o in enumerate(q.options) if o == entry["choice"]), None)
        picked = int(q.options[picked].split(":", 1)[0]) if picked is not None else None
        fig = figures.key_row(ev["weights"], ev["keys"], ev["allowed"], ev["query"], ev["row"],
                              t("qz.row_title", block=widgets.block_label(ev["block"]), layer=ev["layer"],
                                head=ev["head"], query=ev["query"]),
                              revealed=False, picked=picked, xlabel=t("qz.key"), ylabel=t("qz.query"),
                              hover=t("qz.click"))
        key = f"qz_row_{qid}"
        widgets.show(fig, key=key, html=False, on_select=partial(_clicked, qid, list(q.options), key),
                     selection_mode="points")
    elif q.kind == "next_token":
        st.caption(t("qz.so_far", step=ev["step"], pieces=widgets.md_escape(" ".join(ev["so_far"]))))
    elif q.kind == "knockout_changes":
        st.caption(t("qz.output", output=widgets.md_escape(ev["output"])))
    elif q.kind == "why_key":
        st.caption(t("qz.why_context", query=widgets.md_escape(ev["query"]), piece=widgets.md_escape(ev["key"]),
                     weight=ev["weight"]))
    elif q.kind == "fill_blank":
        st.caption(t("qz.blank", pieces=widgets.md_escape(" ".join(ev["text"]))))
    elif q.kind == "top_piece":
        st.caption(t("qz.top_word", step=ev["step"], word=widgets.md_escape(ev["word"])))


def _verdict(q: Question, choice) -> None:
    right = q.options[q.answer]
    if choice == right:
        st.success(t("qz.right", answer=widgets.md_escape(option_label(right))), icon=":material/check_circle:")
    else:
        st.info(t("qz.wrong", answer=widgets.md_escape(option_label(right)),
                  choice=widgets.md_escape(option_label(choice or ""))), icon=":material/lightbulb:")


def _evidence(qid: str, q: Question, choice) -> None:
    """The reveal's figure, the answer highlighted, and its evidence in one line."""
    ev, key = q.evidence, f"qz_evidence_{qid}"
    if q.kind == "argmax_key":
        picked = int(choice.split(":", 1)[0]) if choice else None
        fig = figures.key_row(ev["weights"], ev["keys"], ev["allowed"], ev["query"], ev["row"],
                              t("qz.row_title", block=widgets.block_label(ev["block"]), layer=ev["layer"],
                                head=ev["head"], query=ev["query"]),
                              revealed=True, best=ev["best"], picked=picked, xlabel=t("qz.key"), ylabel=t("qz.query"),
                              colorbar=t("qz.weight"))
        line = t("qz.ev.argmax", piece=widgets.md_escape(ev["keys"][ev["best"]]),
                 weight=ev["weights"][ev["best"]], query=widgets.md_escape(ev["query"]))
    elif q.kind == "next_token":
        fig = figures.candidates(ev["pieces"], ev["probs"], ev["chosen"], t("qz.next_title", step=ev["step"]),
                                 xlabel=t("qz.prob"), ylabel=t("qz.candidate"))
        line = t("qz.ev.next", piece=widgets.md_escape(ev["pieces"][ev["chosen"]]), p=ev["probs"][ev["chosen"]])
    elif q.kind == "fill_blank":
        fig = figures.candidates(ev["pieces"], ev["probs"], ev["chosen"], t("qz.fill_title"),
                                 xlabel=t("qz.prob"), ylabel=t("qz.candidate"))
        line = t("qz.ev.fill", piece=widgets.md_escape(ev["pieces"][0]), p=ev["probs"][0])
    elif q.kind == "why_key":
        winner = q.options[q.answer]
        fig = figures.score_sources(ev["groups"], winner, t("qz.why_title", piece=ev["key"]),
                                    names={g: option_label(g) for g in ev["groups"]}, xlabel=t("qz.why_x"),
                                    ylabel=t("qz.why_y"))
        line = t("qz.ev.why", piece=widgets.md_escape(ev["key"]), score=ev["score"], source=option_label(winner),
                 value=ev["groups"][winner])
    elif q.kind == "residual_grows":
        fig = charts.curves(list(range(len(ev["lengths"]))), {t("qz.resid_y"): ev["lengths"]}, t("qz.resid_title"),
                            t("qz.resid_x"), t("qz.resid_y"), height=320)
        line = t("qz.ev.resid", first=ev["lengths"][0], last=ev["lengths"][-1], ratio=ev["ratio"],
                 threshold=ev["threshold"])
    elif q.kind == "knockout_changes":
        fig = figures.outputs(ev["with"], ev["without"], t("qz.ko_title", block=widgets.block_label(ev["block"]),
                                                             layer=ev["layer"], head=ev["head"]),
                              with_label=t("qz.with"), without_label=t("qz.without"), xlabel=t("qz.position"),
                              colorbar=t("qz.differs"))
        line = t("qz.ev.changed" if ev["changed"] else "qz.ev.same", output=widgets.md_escape(ev["output"]),
                 output_off=widgets.md_escape(ev["output_off"]))
    elif q.kind == "top_piece":            # occlusion's answer, attention beside it
        fig = attribution_figures.method_rows(
            {"occlusion": ev["occlusion"], "attention": ev["attention"]}, ev["pieces"],
            {m: t(f"ab.m.{m}") for m in ("occlusion", "attention")}, t("qz.top_title", word=ev["word"]),
            t("ab.axis_pieces"), t("ab.axis_method"), t("ab.cb"), t("ab.hover"),
            marks={"occlusion": [ev["best"]], "attention": [ev["attention_best"]]})
        same = ev["best"] == ev["attention_best"]
        line = t("qz.ev.top_same" if same else "qz.ev.top_differs", piece=widgets.md_escape(ev["pieces"][ev["best"]]),
                 drop=ev["occlusion"][ev["best"]], looked=widgets.md_escape(ev["pieces"][ev["attention_best"]]),
                 weight=ev["attention"][ev["attention_best"]], word=widgets.md_escape(ev["word"]))
    else:
        fig = figures.role_scores(ev["stats"], ev["threshold"], ev["role"] if ev["role"] in ev["stats"] else None,
                                  t("qz.role_title", block=widgets.block_label(ev["block"]), layer=ev["layer"],
                                    head=ev["head"]),
                                  names={r: option_label(r) for r in ev["stats"]}, xlabel=t("qz.role"),
                                  ylabel=t("qz.mean_weight"), threshold_label=t("qz.threshold"))
        line = t("qz.ev.role", role=option_label(ev["role"]), evidence=widgets.md_escape(ev["evidence"]),
                 entropy=ev["entropy"], max_entropy=ev["max_entropy"])
    widgets.show(fig, key=key, html=False)
    st.caption(line)
