"""The floor of a class's polling: a bare Streamlit app whose only element is an answer box like the class page's
(a step line, a question, a status line, four options, Send), rerun every 3 s by its fragment timer, reading nothing."""
import streamlit as st


@st.fragment(run_every=3.0)
def box() -> None:
    st.markdown("**Step 1 of 5**")
    st.markdown("One query's scores are q·k = [8, 4, 0] in a head with d_k = 16. Compared with the softmax of "
                "[8, 4, 0], the softmax of [2, 1, 0] is:")
    st.caption("Vote 1 is open.")
    st.radio("Your answer", ["A. sharper", "B. flatter", "C. the same", "D. no longer adds up to 1"], index=None,
             key="lc_pick_floor", label_visibility="collapsed")
    st.button("Send", key="lc_send", type="primary")


box()
