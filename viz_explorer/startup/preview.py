"""A fresh server's first page: the Overview's parts that need no model (title, intro, the architecture diagram
from the default checkpoint's config.json, its encoder length from SentencePiece alone) drawn at once, with a
note that the model is loading where its output goes. When the model is ready, the full page replaces it by
itself (a fragment polls viz_explorer/startup/prestart.py and reruns the app); nobody clicks anything.

Only for a visitor of the default page with no link parameters other than lang and present, while the
process is not warm yet; everything it uses is imported by prestart's light part before it draws (two
threads importing numpy, pandas or plotly at once is unsafe: viz_explorer/startup/warmup.py). Deep links, lessons and
other pages wait for the model as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import streamlit as st

from viz_explorer.server import defaults
from viz_explorer.startup import warmup
from viz_explorer.startup import prestart
from viz_explorer.kit import registry
from viz_explorer.kit.strings import t
from viz_transformer.core import checkpoint_files as files
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.encoding import encode_input

PARAMS = {"lang", "present"}     # the link parameters that still get the preview
LIGHT_WAIT_S = 10.0              # the most the preview waits for prestart's light part (then: as before)
POLL_S = 0.25                    # how often the page asks whether the model is ready
POLLED = "_preview_polls"        # session state: the browser's polls since the preview was sent
SEEN_POLLS = 2                   # the poll that says the preview is drawn (see _when_ready)


@dataclass(frozen=True)
class Sketch:
    """What the Overview can show before the model is loaded: the default checkpoint's config, the default
    text's encoder length (None for a one-sequence model) and the decoder's length at its first step (its
    prompt: [begin] for an encoder-decoder, before any output)."""
    cfg: ModelConfig
    src_len: Optional[int]
    tgt_len: int


def sketch(root=None) -> Optional[Sketch]:
    """The default checkpoint (defaults.CHECKPOINT, one of ours) and the first example of its kind, read from
    config.json and tokenizer.model alone (no torch); None when it is missing or does not read."""
    folder = (root or defaults.checkpoints_root()) / defaults.CHECKPOINT
    try:
        cfg = files.read_config_json(folder)
        tok = files.load_tokenizer(folder, cfg)
        inp = encode_input(tok, cfg, defaults.EXAMPLES[defaults.kind(cfg)][0])   # far shorter than max_len
    except (ValueError, OSError):          # CheckpointError is a ValueError
        return None
    return Sketch(cfg, len(inp.src) if inp.src is not None else None, len(inp.prompt))


def shown(current, first, plotly_sent: bool) -> bool:
    """The preview, when this run should draw one (`wanted`) and could (`draw`); then prestart's heavy part may
    start (this run does not import beside it either way). `first`: the run's first element, an st.empty
    slot, holding warmup's blank chart when plotly_sent."""
    sent = False
    try:
        sent = wanted(current) and draw(first, plotly_sent)
        return sent
    finally:
        prestart.visited(preview=sent)


def wanted(current) -> bool:
    """This run should draw the preview: the default page, no link parameters but lang/present, the process
    not warm, and prestart at work (started here when no other session is importing: `streamlit run app.py`)."""
    if (current.url_path or registry.DEFAULT) != registry.DEFAULT or not set(st.query_params) <= PARAMS:
        return False
    if warmup.ready() or prestart.done() or not warmup.prestart_or_busy(prestart.start):
        return False
    return True


def draw(first, plotly_sent: bool) -> bool:
    """The preview, once prestart's light part is imported (False: it was not in time, or the default checkpoint
    does not read; the caller goes on as before). Its main area has the full page's elements in the same
    places after `first` (its loading note, then the blank chart), so the page replaces it in place."""
    if not plotly_sent:
        first.caption(t("warmup.loading"))            # while the light part finishes (serve.py: done already)
    made = prestart.light(LIGHT_WAIT_S)
    if made is None:
        return False
    if not plotly_sent:
        with first.container():       # plotly.js loads while this run draws (only now: see the module's docstring)
            warmup.bundles(code_and_formula=False)
    from viz_explorer.kit import overview_head    # plotly and numpy: imported whole by the light part by now
    cfg = made.cfg
    right = overview_head.draw(cfg, made.src_len, made.tgt_len)
    with right:
        st.status(t("pv.loading"), state="running")
        st.caption(t("pv.first_step_" + ("ed" if cfg.is_encoder_decoder else "one"), n=made.tgt_len))
    st.session_state[POLLED] = -1        # this run's own call of the fragment makes it 0
    _when_ready()
    return True


@st.fragment(run_every=POLL_S)
def _when_ready() -> None:
    """The full page, by itself, once the model is loaded (or prestart has given up: the page shows why).
    The browser asks for this rerun with a timer, which cannot fire while it compiles plotly.js or draws the
    diagram: its SEEN_POLLS-th poll says the preview is drawn, so prestart's heavy part may start
    (prestart.seen); the next ones load the code and formula bundles the full page uses (1.8 MB more of
    JavaScript to compile, which had delayed the diagram by 0.4 s when sent with it)."""
    if prestart.done():
        st.rerun(scope="app")
    polls = st.session_state[POLLED] = st.session_state.get(POLLED, 0) + 1
    if polls >= SEEN_POLLS:     # the first can come while plotly.js is still downloading (not compiling yet)
        prestart.seen()
    if polls > SEEN_POLLS:
        warmup.bundles(key=None)
