"""Page: the current run as .npz / .json (tensors by capture name) and a self-contained HTML report."""
from functools import partial

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import callbacks
from viz_explorer.kit import context
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer import export
from viz_transformer.core.hook_names import available_blocks, n_layers
from viz_transformer.report import default_heads

ctx = context.need_run()
run, cfg, path = ctx.run, ctx.hm.cfg, str(ctx.path)
st.title(t("ex.title"))
widgets.intro("ex")

st.subheader(t("ex.run"))
st.caption(t("ex.run_help"))
size, left_out = export.tensor_nbytes(run), export.left_out(run)
if left_out:
    st.caption(t("ex.large", gb=size / 1e9, n=len(left_out)))
c = st.columns(2)
stem = f"{ctx.name}-run"
c[0].download_button(t("ex.npz"), data=partial(export.npz_bytes, run), file_name=f"{stem}.npz",
                     mime="application/octet-stream", key="ex_npz", on_click="ignore", icon=":material/data_array:")
c[1].download_button(t("ex.json"), data=partial(export.json_bytes, run), file_name=f"{stem}.json",
                     mime="application/json", key="ex_json", on_click="ignore", icon=":material/data_object:",
                     disabled=size > export.LIMIT, help=t("ex.json_too_large") if size > export.LIMIT else None)

st.subheader(t("ex.report"))
st.caption(t("ex.report_help"))
options = [(b, layer, h) for b in available_blocks(cfg) for layer in range(n_layers(cfg, b)) for h in range(cfg.n_heads)]
opened = (st.session_state.get("at_block"), st.session_state.get("at_layer"), st.session_state.get("at_head"))
default = [opened] if opened in options else default_heads(cfg)
key = "ex_heads"
st.session_state[key] = [h for h in (st.session_state.get(key) or default) if h in options]   # another checkpoint
heads = st.multiselect(t("ex.heads"), options, key=key, max_selections=6,
                       format_func=in_language(callbacks.head_option))
st.download_button(t("ex.download_report"), data=partial(cached.report_html, path, ctx.stamp, ctx.text, tuple(heads)),
                   file_name=f"{ctx.name}-report.html", mime="text/html", key="ex_report", on_click="ignore",
                   type="primary", icon=":material/description:")
st.info(t("ex.figures"))
