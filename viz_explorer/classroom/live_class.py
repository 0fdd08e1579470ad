"""A live class on one page: a teacher starts it on a lesson and moves it step by step; students join with
its code, anonymously, and answer the current step's question; the teacher's chart of the answers
refreshes by itself (a fragment that reruns every second, never the page).

Who is who: `?class=CODE` is a student (their browser's random id is `me=`, written into their own address on
the first visit so a reload keeps it); `?teach=CODE` is the teacher's page, which acts only in a session holding the
teacher's right (viz_explorer/classroom/class_control.py: the session and a cookie, never the address). Join links and the QR
code are built from VIZ_PUBLIC_URL (viz_explorer/server/class_address.py). The store is viz_explorer/classroom/store.py.

The question a class is on comes from viz_explorer/classroom/class_questions.py (a bank question the teacher chose,
the lesson step's own question, or the check-in poll).
An answer given in a student's lesson tab reaches the class through quiz.on_answer (record_quiz_answer).
"""
from __future__ import annotations

import secrets
import time
from typing import Callable, Optional

import streamlit as st

from viz_explorer.classroom import store as cr

from viz_explorer.classroom import votes as cv
from viz_explorer.server import class_address as ca
from viz_explorer.classroom import (bank_writer, checks_view, class_control, class_questions, class_watch, qr,
                                    rounds_view, shared_reads)
from viz_explorer.classroom.question import Question
from viz_explorer.classroom.refusals import say
from viz_explorer.lessons import lesson_file, lesson_mode, quiz
from viz_explorer.kit import presenter, screen, widgets
from viz_explorer.kit.strings import current, t

TEACHER_EVERY = 1.0           # s between two refreshes of the teacher's chart (the chart is <= 2 s behind)
SEC = 987654                  # a number no countdown line holds otherwise: replaced by {sec} for the browser
CLASS, TEACH, ME = ca.CLASS, ca.TEACH, ca.ME      # query params; none of them is a secret
OLD_TEACHER = "teacher"       # the secret was once in the address: dropped from it on sight, never read


def reveal_button(code: str, secret: str, q: Question, where=st, **kw) -> None:
    """The teacher's "Reveal the answer" (nothing for a poll, which has no right answer); once pressed, every page
    of the class shows the answer and the question takes no more answers."""
    if q.answer is None:
        return
    if where.button(t("lc.reveal"), key="lc_reveal", icon=":material/visibility:", disabled=cv.revealed(code, q.id),
                 **kw):
        try:
            cv.reveal(code, secret, q.id)
        except cr.ClassError as e:
            st.error(say(e))
            return
        st.rerun()                     # the buttons above were drawn before the reveal: draw them again after it


def revealed_answer(code: str, q: Question, mine: Optional[str] = None, revealed: Optional[bool] = None) -> bool:
    """The answer, once the teacher has revealed it (and, for a student, whether theirs was right); whether it is.
    revealed: the question's state when the caller has read it already."""
    if q.answer is None or not (cv.revealed(code, q.id) if revealed is None else revealed):
        return False
    label = dict(zip(q.options, q.labels))
    right = widgets.md_escape(label.get(q.answer, q.answer))
    if mine is None:
        st.success(t("lc.answer_is", answer=right), icon=":material/lightbulb:")
    elif mine == q.answer:
        st.success(t("lc.answer_right", answer=right), icon=":material/check_circle:")
    else:
        st.info(t("lc.answer_wrong", answer=right, choice=widgets.md_escape(label.get(mine, mine))),
                icon=":material/lightbulb:")
    return True


def _present() -> None:
    st.session_state[presenter.KEY] = True


def _n_steps(lesson: str) -> int:
    try:
        return len(lesson_mode.load(lesson).steps)
    except ValueError:
        return 1


def own_link(path: str, **params) -> str:
    """A link for this browser's own next tab: on the address it already uses (the teacher's cookie lives there)."""
    return ca.link(ca.app_root(st.context.url), path, **params)


def join_link(code: str) -> str:
    """The class's join link for students' phones (VIZ_PUBLIC_URL, else this page's address; a bad setting is said
    in one line and this page's address is used)."""
    try:
        base = ca.public_base(st.context.url)
    except ValueError as e:
        st.warning(str(e), icon=":material/warning:")
        base = ca.app_root(st.context.url)
    if ca.needs_warning(st.context.url):
        st.warning(t("lc.loopback", env=ca.ENV), icon=":material/smartphone:")
    return ca.join_link(base, code, current())


# ---- the teacher ------------------------------------------------------------------------------------------

def begin(lesson: str) -> str:
    """Start a class on `lesson` with this session as its teacher; returns the class code (the address's TEACH).
    cr.ClassError (a Refusal: one line to show) when the class store refuses."""
    code, secret = cr.create_class(lesson)
    class_control.grant(code, secret)               # the right stays in this session, not the address
    return code


def start() -> None:
    """No class in the address: start one (a teacher) or type a code (a student)."""
    left, right = st.columns(2, gap="large")
    with left.container(border=True):
        st.subheader(t("lc.start_title"))
        names = lesson_file.list_lessons(lesson_mode.folder())
        if not names:
            st.info(t("lc.no_lessons"))
            return
        lesson = widgets.select(st, t("lc.lesson"), names, key="lc_lesson")
        if st.button(t("lc.start"), key="lc_start", type="primary", icon=":material/play_arrow:"):
            st.query_params[TEACH] = begin(lesson)
            st.rerun()
        bank_writer.writer()
    with right.container(border=True):
        st.subheader(t("lc.join_title"))
        typed = st.text_input(t("lc.code"), key="lc_code", max_chars=12, placeholder="ABCD2345")
        if st.button(t("lc.join"), key="lc_join", icon=":material/login:") and typed:
            try:
                st.query_params[CLASS] = cr.normal_code(typed)
                st.rerun()
            except cr.ClassError as e:
                st.error(say(e))


def teacher(code: str, secret: str, lesson: str, step: int) -> None:
    n = _n_steps(lesson)
    st.subheader(t("lc.teacher_title", code=code, lesson=lesson))
    qr.class_banner(code, join_link(code))   # the code in very large type and the join link's QR code
    class_control.show_key(secret)
    b1, b2, b3, b4 = st.columns([1.5, 1.3, 2.4, 1.6], vertical_alignment="center")
    go_to = None
    if b1.button(t("lc.back"), key="lc_back", disabled=step <= 0, icon=":material/chevron_left:"):
        go_to = step - 1
    if b2.button(t("lc.next"), key="lc_next", disabled=step + 1 >= n, type="primary",
                 icon=":material/chevron_right:", icon_position="right"):
        go_to = step + 1
    if go_to is not None:
        cr.set_step(code, secret, go_to)
        st.rerun()
    b3.link_button(t("lc.open_step", i=step + 1, n=n),          # the class follows that tab's lesson steps
                   own_link("/", lesson=lesson, step=step + 1, lang=current(), **{TEACH: code}),
                   icon=":material/open_in_new:")
    b4.button(t("lc.present"), key="lc_present", on_click=_present, icon=":material/co_present:")
    try:                                 # the database refusing (full, unreachable): said once, the chart still shown
        focus = cv.focus(code)
        checks_view.panel(code, secret, focus)
        q = class_questions.class_question(lesson, step, focus)
        rounds_view.controls(code, secret, q)
        reveal_button(code, secret, q)
    except cr.ClassError as e:
        st.error(say(e))
        focus, q = None, class_questions.question(lesson, step)
    live_chart(code, secret, q, step, n, focus=focus)
    checks_view.report(code, secret, class_questions.lesson_answer)
    class_control.keep_in_browser(code, secret)      # last: an element drawn once must not shift the others


@st.fragment(run_every=TEACHER_EVERY)
@screen.laid_out
def live_chart(code: str, secret: str, q: Question, step: int, n: int,
               area: Optional[tuple[float, float]] = None, focus: Optional[str] = None) -> None:
    """How many answered and how (as rounds_view.teacher_results allows): reread from the database every
    TEACHER_EVERY seconds. area: the px a presented chart may fill (default: a projector's screen)."""
    failed = cr.failures(code)
    if failed is not None:             # students' answers this server could not save: the teacher must know
        st.warning(t(f"lc.failed.{failed[0]}", n=failed[1], seconds=cr.FAILURE_WINDOW), icon=":material/database:")
    try:
        s, names = cv.state(code, q.id), cr.roster(code, secret)
        now_step, now_focus = cr.lesson_and_step(code)[1], cv.focus(code)
    except cr.ClassError as e:
        st.error(say(e))
        return
    if now_step != step or now_focus != focus:     # another tab of the teacher moved the class: follow it
        st.rerun(scope="app")
    st.markdown(q.prompt)
    if q.letters:                      # a bank question's options, by the letters its chart is drawn with
        st.markdown("\n".join(f"- **{x}.** {widgets.md_escape(lab.split('. ', 1)[-1])}" for x, lab in
                               zip(q.letters, q.labels)))
    st.caption(rounds_view.status(s, time.time()))
    if revealed_answer(code, q, revealed=s.revealed) and q.where:
        st.caption(q.where)
    m1, m2 = st.columns(2)
    m1.metric(t("lc.answered"), t("lc.answered_n", k=cv.answered(code, q.id, round=s.round), n=len(names)))
    on = checks_view.position(focus)
    if on is None:
        m2.metric(t("lc.step_metric"), t("lc.step_n", i=step + 1, n=n))
    else:                              # a concept check: where in it, not the lesson's step
        m2.metric(t(f"ck.metric.{on[0]}"), t("ck.question_n", i=on[1] + 1, n=on[2]))
    with presenter.within(*(area or presenter.AREA_PX)):
        rounds_view.teacher_results(code, secret, q, s, t("ck.chart_title") if q.letters else
                                    t("lc.chart_title", i=step + 1))
    st.caption(t("lc.updated", time=time.strftime("%H:%M:%S")))
    if names:
        with st.expander(t("lc.roster", n=len(names))):
            st.text(", ".join(x or t("lc.anonymous") for x in names))        # plain text: nicknames are not HTML


# ---- a student ---------------------------------------------------------------------------------------------

def browser_id() -> str:
    """This browser's random id, kept in its own address (`me=`) so a reload keeps it."""
    me = st.query_params.get(ME, "")
    if not cr.BROWSER_ID.match(me or ""):
        me = st.session_state.get("lc_me") or secrets.token_urlsafe(12)
        st.query_params[ME] = me
    st.session_state["lc_me"] = me
    return me


def remember() -> None:
    """Call on every run (app.py), before lesson mode: who this session is in a class, kept in the session (a page
    switch drops the address's other parameters). A student's class and browser id from the address, so a lesson
    tab opened from the class still answers as that student; `teach=CODE` in a browser that holds the teacher's
    right (class_control.granted), so the class follows the teacher's own lesson tab (follow_lesson)."""
    if OLD_TEACHER in st.query_params:
        del st.query_params[OLD_TEACHER]
    code, me, teach = st.query_params.get(CLASS), st.query_params.get(ME), st.query_params.get(TEACH)
    try:
        if teach:
            class_control.granted(cr.normal_code(teach))
        elif code and me and cr.BROWSER_ID.match(me):
            st.session_state["lc_class"], st.session_state["lc_me"] = cr.normal_code(code), me
    except cr.ClassError:
        pass


def follow_lesson() -> None:
    """Call after lesson mode (app.py): in the teacher's session, the class moves to the step the teacher's
    lesson shows (the teacher walks the lesson; the students' boxes follow)."""
    teach, lesson = st.session_state.get(class_control.SESSION), st.session_state.get("lesson")
    if not (isinstance(teach, tuple) and isinstance(lesson, dict) and isinstance(lesson.get("step"), int)):
        return
    try:
        name, step = cr.lesson_and_step(teach[0])
        if name == lesson.get("name") and step != lesson["step"]:
            cr.set_step(teach[0], teach[1], lesson["step"])
    except cr.ClassError:
        st.session_state.pop(class_control.SESSION, None)


def record_quiz_answer(question_id: str, options: list[str], choice: str) -> None:
    """For views/shell/quiz.on_answer: a lesson question answered in a student's session is also the student's
    answer in their class (nothing happens in a session that is in no class)."""
    code, me = st.session_state.get("lc_class"), st.session_state.get("lc_me")
    if isinstance(code, str) and isinstance(me, str):
        try:
            cv.answer(code, me, question_id, choice, list(options))
        except cr.ClassError as e:
            st.toast(say(e))


def student(code: str, lesson: str) -> None:
    me = browser_id()
    st.session_state["lc_class"] = code
    if st.session_state.get("lc_joined") != code:
        try:
            cr.join(code, me, st.session_state.get("lc_nick_saved", ""))
            st.session_state["lc_joined"] = code
        except cr.ClassError as e:
            st.error(say(e))
            return
    st.subheader(t("lc.student_title", code=code))
    with st.expander(t("lc.nick_title"), expanded=not st.session_state.get("lc_nick_saved")):
        nick = st.text_input(t("lc.nick"), key="lc_nick", max_chars=cr.NICK_MAX, help=t("lc.nick_help"))
        if st.button(t("lc.nick_save"), key="lc_nick_save"):
            try:
                st.session_state["lc_nick_saved"] = cr.join(code, me, nick if isinstance(nick, str) else "")
            except cr.ClassError as e:
                st.error(say(e))
    answer_box(code, me, _n_steps(lesson))


@st.fragment
@screen.laid_out
def answer_box(code: str, me: str, n: int) -> None:
    """The class's current question and the vote that is open; sending an answer reruns only this box, and so does
    its watcher when the class changes (class_watch.py)."""
    q = None
    try:
        lesson, step, focus = cv.now(code, fresh=shared_reads.FRESH)
        q = class_questions.class_question(lesson, step, focus)
        drawn = class_watch.stamp((lesson, step, focus), class_watch.seen(code, q.id))   # read before drawing
        s, votes = cv.mine(code, me, q.id, fresh=shared_reads.FRESH)
    except cr.ClassError as e:
        st.error(say(e))
        if q is not None or e.key != "no_class":          # the store failing: the box looks again
            _watch(code, q.id if q is not None else "-", class_watch.NONE, None)
        return
    if focus is None:
        st.markdown(f"**{t('lc.step_n', i=step + 1, n=n)}**")
        st.link_button(t("lc.open_step", i=step + 1, n=n),
                       own_link("/", lesson=lesson, step=step + 1, lang=current(), **{CLASS: code, ME: me}),
                       icon=":material/open_in_new:")
    else:                                   # a concept check: its page is not offered before the answer is revealed
        st.markdown(f"**{t('ck.student_on')}**")
    st.markdown(q.prompt)
    now = time.time()
    mine = rounds_view.student_vote(code, me, q, s, votes, send, lambda: _watch(
        code, q.id, drawn, s.left(now) if s.taking(now) else None))
    rounds_view.student_results(code, q, s)
    if revealed_answer(code, q, mine, revealed=s.revealed):
        if q.where:
            st.caption(q.where)
    elif mine is not None:
        label = dict(zip(q.options, q.labels))
        st.success(t("lc.sent" if s.taking(time.time()) else "pi.sent_closed", choice=widgets.md_escape(
            label.get(mine, mine))), icon=":material/check:")


def _watch(code: str, question: str, drawn: str, left) -> None:
    class_watch.watch(code, question, drawn, left, (t("pi.state.left", sec=1), t("pi.state.left", sec=SEC).replace(
        str(SEC), "{sec}")))


def send(code: str, me: str, q: Question, pick) -> Optional[int]:
    """Record the student's pick; the round it went to (None, with a clear message, when there is no pick or it
    is refused)."""
    if pick is None:
        st.warning(t("lc.pick_first"))
        return None
    try:
        return cv.answer(code, me, q.id, pick, list(q.options))
    except cr.ClassError as e:
        st.error(say(e))
        return None


def show(teacher_view: Callable[[str, str, str, int], None] = teacher) -> None:
    """The page: start or join a class, the class as its teacher sees it (`teach=CODE`, in a browser that holds
    the right, drawn by teacher_view(code, secret, lesson, step); elsewhere the teacher key's box), or as a student
    sees it (`class=CODE`)."""
    teach = st.query_params.get(TEACH)
    code = teach or st.query_params.get(CLASS)
    if not code:
        start()
        return
    try:
        code = cr.normal_code(code)
        lesson, step = cr.lesson_and_step(code)
    except cr.ClassError as e:
        st.error(say(e))
        start()
        return
    if not teach:
        student(code, lesson)
    elif (secret := class_control.granted(code)) is not None:
        teacher_view(code, secret, lesson, step)
    else:
        class_control.key_form(code)


if not any(getattr(h, "__module__", "") == __name__ and getattr(h, "__name__", "") == "record_quiz_answer"
           for h in quiz.on_answer):                  # once per process, also when this module is reloaded
    quiz.on_answer.append(record_quiz_answer)
