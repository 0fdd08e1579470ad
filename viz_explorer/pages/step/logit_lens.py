"""Page: the logit lens, every decoder layer read with the final norm and unembedding."""
import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import context
from viz_explorer.pages.step import fill_blank
from viz_explorer.pages.step import lens_table
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import t
from viz_transformer.analysis import patterns
from viz_transformer.run import lenses
from viz_transformer.plots import figure_rules, lens_figures

WINDOW = 20        # positions shown around the marked step (each cell names a token) ...
BIG_VOCAB = 50_000  # ... half as many beyond this vocabulary: each cell is a read-out over the whole vocabulary
ctx = context.need_run()
run = ctx.run
st.title(t("ln.title"))
if ctx.hm.cfg.is_encoder_only:          # no decoder rows: the masked-LM head's reading at each [MASK] instead
    fill_blank.show(ctx)
    st.stop()
st.caption(t("ln.intro"))
st.info(t("ln.assumes"), icon=":material/info:")

start, n_pos = run.prompt_len - 1, len(run.tgt_ids)      # the lens view's output_start and positions
n_steps = n_pos - start
step = None
if n_steps > 0:
    st.session_state["ln_step"] = min(max(1, st.session_state.get("ln_step", 1)), n_steps)
    step = st.slider(t("ln.step"), 1, n_steps, key="ln_step", help=t("ln.step_help")) if n_steps > 1 else 1
else:
    st.info(t("ln.no_output"))
pos = None if step is None else start + step - 1
size = WINDOW if ctx.hm.cfg.vocab_size <= BIG_VOCAB else WINDOW // 2
size = min(size, max(4, (figure_rules.figure_px() - 150) // 36))     # a phone: as many 36 px columns as fit
a, b = patterns.token_window(n_pos, max(0, (start if pos is None else pos) - size // 2), size)
view = cached.lens(str(ctx.path), ctx.stamp, ctx.text, (a, b))       # read out at the shown positions only
names = lens_table.row_labels(len(view.rows))
if (a, b) != (0, n_pos):
    st.caption(t("ln.window", a=a, b=b - 1, n=n_pos))
widgets.show(lens_figures.lens_grid(view.final_prob, [[c[0] for c in r] for r in view.top_pieces], names,
                                  view.positions, view.final_pieces, t("ln.grid_title"), t("ln.axis.pos"),
                                  t("ln.axis.row"), t("ln.cb"), output_start=start, marked=pos,
                                  hover_top=t("ln.hover_top"), window=(a, b)), key="ln_grid")
if start > 0:
    st.caption(t("ln.output_line", n=n_steps))

if pos is not None:
    final = view.final_pieces[pos]
    st.subheader(t("ln.table_title", i=step, query=view.positions[pos], final=final))
    known = lenses.first_row_known(view)[pos]
    st.markdown(widgets.md_escape(t("ln.known", row=names[known]) if known is not None else t("ln.never")))
    st.dataframe(lens_table.column_table(lenses.view_column(view, pos), final), hide_index=True, key="ln_table")
