"""The Overview's "Check against transformers" for a Hugging Face folder: a button (with a time estimate for a
folder past a billion parameters), then a badge with the verdict and its numbers, kept in the session beside
the folder's name so every later visit shows it."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit.strings import t
from viz_transformer.run import parity

KEY = "parity_checked"          # session: {(folder name, its stamp): ParityReport}


def _badge(report) -> None:
    st.badge(t("pc.ok" if report.ok else "pc.differs"), icon=":material/check:" if report.ok else ":material/warning:",
             color="green" if report.ok else "red")
    st.caption(t("pc.numbers", what=t("pc.what." + report.compared.replace(" ", "_")),
                  logits=f"{report.worst_logits:.1e}", pattern=f"{report.worst_pattern:.1e}",
                  n=len(report.results), version=report.version, seconds=f"{report.seconds:.1f}"))
    if any(r.ids_agree is False for r in report.results):
        st.caption(t("pc.ids_differ"))


def show(ctx) -> None:
    """Drawn under the model's output; nothing for this project's own checkpoints."""
    hm = ctx.hm
    if (hm.meta or {}).get("source") != "Hugging Face":
        return
    kept = st.session_state.setdefault(KEY, {})
    name = (ctx.name, ctx.stamp)                   # a folder changed on disk is checked again
    if name in kept:
        _badge(kept[name])
        return
    asking = st.empty()                               # the button goes once the verdict is in
    with asking.container():
        if parity.n_params(hm) > parity.LARGE:
            st.caption(t("pc.estimate", seconds=f"{parity.estimate_seconds(hm):.0f}"))
        clicked = st.button(t("pc.run"), key="pc_run", help=t("pc.help"))
    if not clicked:
        return
    try:
        with st.spinner(t("pc.running")):
            kept[name] = cached.parity(str(ctx.path), ctx.stamp)
    except (parity.MissingTransformers, ValueError) as e:
        st.info(str(e))
        return
    asking.empty()
    _badge(kept[name])
