"""Page: the lesson shelf. Every lesson with the tutorial chapter it follows, its length, its questions, its
languages and its model (viz_explorer/lessons/shelf.py); one click opens it here, or starts a live class on it."""
import streamlit as st

from viz_explorer.classroom import live_class
from viz_explorer.classroom import store as cr
from viz_explorer.kit import registry, widgets
from viz_explorer.kit.strings import current, t
from viz_explorer.lessons import lesson_file, lesson_mode, shelf

st.title(t("sh.title"))
st.caption(t("sh.intro"))
lang = current()
rows = shelf.shelf(lesson_mode.folder())
if not rows:
    st.info(t("lc.no_lessons"))
for row in rows:
    with st.container(border=True, key=f"sh_{row.name}"):
        if row.error:
            st.warning(t("sh.broken", name=row.name, error=row.error), icon=":material/warning:")
            continue
        st.markdown(f"**{widgets.md_escape(lesson_file.note(row.title, lang))}**")
        if row.chapter:
            st.caption(t("sh.chapter", chapter=widgets.md_escape(lesson_file.note(row.chapter, lang))))
        st.caption(t("sh.facts", steps=row.steps, questions=row.questions,
                     langs=" · ".join(t("sh.lang." + x) for x in row.languages), model=row.checkpoint or "–"))
        left, right = st.columns(2)
        left.button(t("sh.open"), key=f"sh_open_{row.name}", on_click=lesson_mode.open_lesson, args=(row.name,),
                    type="primary", icon=":material/school:", width="stretch")
        if right.button(t("sh.class"), key=f"sh_class_{row.name}", icon=":material/groups:", width="stretch"):
            try:
                code = live_class.begin(row.name)
            except cr.ClassError as e:
                st.error(live_class.say(e))
            else:
                st.switch_page(registry.page_path(registry.spec("live_class")),
                               query_params={live_class.TEACH: code, "lang": lang})
