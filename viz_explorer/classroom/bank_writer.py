"""A teacher writes their own questions in the app (as lessons are written: a draft in the session, downloaded as a
file) and puts the file in questions/, where the live class offers it beside the concept checks (bank.py reads it
and refuses a broken one in one line).
"""
from __future__ import annotations

import re

import streamlit as st

from viz_explorer.classroom import bank
from viz_explorer.kit import registry, widgets
from viz_explorer.kit.strings import t
from viz_explorer.lessons import lesson_file

N_OPTIONS = 4
DRAFT = "bw_draft"
DEFAULT_TITLE = {"en": "My questions", "zh": "我的题目"}


def slug(text: str) -> str:
    """An id from a name: lower case a-z, 0-9 and -, at most 40 characters ("" for a name with none of them)."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")[:40]


def question(fields: dict, n: int) -> dict:
    """A bank question (the file's dict) from the writer's fields: concept, form ("", "a", "b"), page, answer (the
    index among the options written), and per language prompt, figure and options (empty options left out)."""
    langs = [lang for lang in lesson_file.LANGS if fields.get(f"prompt_{lang}", "").strip()]
    kept = [j for j in range(N_OPTIONS) if any(fields.get(f"opt_{lang}_{j}", "").strip() for lang in langs)]
    concept = slug(fields.get("concept", "")) or f"concept-{n}"
    form = fields.get("form", "")
    answer = fields.get("answer", 0)
    return {"id": f"{concept}-{form}" if form else f"{concept}-{n}", "concept": concept, **({"form": form} if form else {}),
            "page": fields.get("page", ""),
            "figure": {lang: fields.get(f"figure_{lang}", "").strip() or "–" for lang in langs},
            "prompt": {lang: fields[f"prompt_{lang}"].strip() for lang in langs},
            "options": [{lang: fields.get(f"opt_{lang}_{j}", "").strip() for lang in langs
                         if fields.get(f"opt_{lang}_{j}", "").strip()} for j in kept],
            "answer": kept.index(answer) if answer in kept else -1}


def bank_text(title: dict, questions: list[dict]) -> str:
    """The draft as a bank file in the languages every question is written in, checked as one is read (ValueError
    in one line)."""
    langs = [lang for lang in lesson_file.LANGS if all(lang in q["prompt"] for q in questions)] or ["en"]
    title = {lang: (title.get(lang) or "").strip() or DEFAULT_TITLE[lang] for lang in langs}
    b = bank.parse_bank({"title": title, "questions": questions}, "my-questions")
    return bank.to_json(b)


def writer() -> None:
    """The teacher's question writer (an expander): the fields, "Add the question", the draft's download."""
    draft = st.session_state.get(DRAFT)
    if not isinstance(draft, list):
        st.session_state[DRAFT] = draft = []
    with st.expander(t("bw.title"), icon=":material/edit_note:"):
        st.caption(t("bw.help", folder="questions/"))
        fields = {"concept": st.text_input(t("bw.concept"), key="bw_concept", max_chars=48),
                  "form": (st.segmented_control(t("bw.form"), ["none", "a", "b"], key="bw_form", default="none",
                                                format_func=lambda f: t(f"bw.form.{f}")) or "none").replace("none", ""),
                  "page": widgets.select(st, t("bw.page"), list(lesson_file.PAGES), key="bw_page",
                                         format_func=lambda p: t(registry.spec(p).title))}
        for lang in lesson_file.LANGS:
            st.markdown(f"**{t('bw.lang.' + lang)}**")
            fields[f"prompt_{lang}"] = st.text_area(t("bw.prompt"), key=f"bw_prompt_{lang}", max_chars=1000, height=80)
            for j in range(N_OPTIONS):
                fields[f"opt_{lang}_{j}"] = st.text_input(t("bw.option", x=bank.OPTIONS[j]), key=f"bw_opt_{lang}_{j}",
                                                          max_chars=200)
            fields[f"figure_{lang}"] = st.text_input(t("bw.figure"), key=f"bw_figure_{lang}", max_chars=200)
        fields["answer"] = st.radio(t("bw.answer"), list(range(N_OPTIONS)), key="bw_answer", horizontal=True,
                                    format_func=lambda j: bank.OPTIONS[j])
        if st.button(t("bw.add"), key="bw_add", icon=":material/add:"):
            new = question(fields, len(draft) + 1)
            try:
                bank.parse_bank({"title": {k: "–" for k in new["prompt"]} or {"en": "–"},
                                 "questions": [*draft, new]}, "my-questions")
            except ValueError as e:
                st.error(str(e))
            else:
                draft.append(new)
        st.caption(t("bw.count", n=len(draft)))
        if draft:
            title = {lang: st.text_input(t("bw.bank_title", lang=t("bw.lang." + lang)), key=f"bw_title_{lang}")
                     for lang in lesson_file.LANGS}
            try:
                text = bank_text(title, draft)
            except ValueError as e:
                st.error(str(e))
            else:
                st.download_button(t("bw.download"), text, file_name="my-questions.json", mime="application/json",
                                   key="bw_download", icon=":material/download:")
            st.button(t("bw.clear"), key="bw_clear", on_click=lambda: st.session_state.pop(DRAFT, None))
