"""The class banner: a class code in very large type beside the QR code of the address that joins the class,
for a projector. The QR code is made by segno (pure Python, no image library needed for PNG).

    from viz_explorer.classroom import qr
    qr.class_banner("K7Q2", "https://example.org/live_class?class=K7Q2")
"""
from __future__ import annotations

import streamlit as st
import segno

from viz_explorer.kit.strings import t
from viz_explorer.kit.widgets import md_escape

MAX_URL = 1000          # characters; a longer address makes a QR code too dense to scan from the back of a room
SIDE_PX = 480           # about how wide the banner's code is drawn: a whole number of pixels per module
BORDER = 4              # the quiet zone the standard asks for, in modules
# A fixed string, no user content: the code's size and face.
STYLE = """<style>
.st-key-class_code p { font-size: clamp(2.5rem, 6vw, 7rem); white-space: nowrap; line-height: 1.1; font-weight: 700; letter-spacing: 0.12em;
  font-family: "Source Code Pro", monospace; margin: 0; }
</style>"""
# The card's column is narrower than the code at 3.5rem in presenter mode's large type on a 1366 px screen: the code is
# at most 15% of its box's width a character (8 characters of about 0.7 em each with their spacing: 84% of the box).
CARD_STYLE = """<style>
.st-key-class_card_code { container-type: inline-size; }
.st-key-class_card_code p { font-size: min(3.5rem, 15cqi); white-space: nowrap; line-height: 1.1; font-weight: 700;
  letter-spacing: 0.1em; font-family: "Source Code Pro", monospace; margin: 0; }
</style>"""
# The join address's box keeps a strip on its right for the copy button Streamlit lays over a code block's top right
# corner (1.5rem wide, 0.5rem in): the address wraps before it instead of running under it.
JOIN_STYLE = """<style>
.st-key-class_join [data-testid="stCode"] pre { padding-right: 2.75rem; }
</style>"""
CARD_PX = 360           # about how wide the card's QR code is drawn


def make(url: str) -> segno.QRCode:
    """The QR code of `url` (error correction M: a code on a screen is seldom damaged, and stays coarse).
    ValueError with a one-line reason for an address that cannot be a join link."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("the join address is empty")
    if len(url) > MAX_URL:
        raise ValueError(f"the join address has {len(url)} characters; at most {MAX_URL} fit a QR code one can scan")
    return segno.make(url.strip(), error="m", micro=False, boost_error=False)


def scale_for(url: str, side_px: int = SIDE_PX, border: int = BORDER) -> int:
    """Whole pixels per module so that the code with its quiet zone is at most side_px wide (at least 4)."""
    return max(4, side_px // make(url).symbol_size(border=border)[0])


def png(url: str, scale: int | None = None, border: int = BORDER) -> bytes:
    """The QR code of `url` as a black-on-white PNG, `scale` pixels per module (default: scale_for(url)),
    `border` modules of quiet zone."""
    import io
    out = io.BytesIO()
    make(url).save(out, kind="png", scale=scale or scale_for(url, border=border), border=border,
                   dark="#000000", light="#ffffff")
    return out.getvalue()


def class_banner(code: str, join_url: str) -> None:
    """The class code in very large type, the QR code of join_url beside it, and the address as text
    (shown literally: neither is ever read as markdown or HTML). A bad address: a one-line warning."""
    try:
        image = png(join_url)
    except ValueError as e:
        st.warning(str(e))
        return
    st.html(STYLE + JOIN_STYLE)
    left, right = st.columns([3, 2], vertical_alignment="center")
    with left:
        st.caption(t("qr.code"))
        with st.container(key="class_code"):
            st.markdown(md_escape(str(code)))
        st.caption(t("qr.scan"))
        with st.container(key="class_join"):
            st.code(join_url.strip(), language=None, wrap_lines=True)
    with right:
        # its own size, lossless: a resized or JPEG image blurs the modules
        st.image(image, width="content", output_format="PNG")


def class_card(code: str, join_url: str) -> None:
    """The class banner stacked for a side column (the "present this class" view): the code, the QR code of
    join_url under it, then the address as text."""
    try:
        image = png(join_url, scale=scale_for(join_url, side_px=CARD_PX))
    except ValueError as e:
        st.warning(str(e))
        return
    st.html(CARD_STYLE + JOIN_STYLE)
    st.caption(t("qr.code"))
    with st.container(key="class_card_code"):
        st.markdown(md_escape(str(code)))
    st.image(image, width="content", output_format="PNG")
    st.caption(t("qr.scan"))
    with st.container(key="class_join"):
        st.code(join_url.strip(), language=None, wrap_lines=True)
