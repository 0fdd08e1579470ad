"""Attention over training: one sentence's attention at each recorded step, from the run's first step (random
weights, or the model it fine-tunes, as meta.json records) to the shipped model, with the loss and score curves and
what the model made of the sentence at that step (a translator's translation, a masked LM's best fill for each
blank)."""
import time

import streamlit as st

from viz_explorer.server import cached
from viz_explorer.kit import callbacks
from viz_explorer.kit import context
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import in_language, t
from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.analysis import summaries
from viz_transformer.plots import heatmaps
from viz_transformer.plots import model_figures
from viz_transformer.plots import summary_figures

ctx = context.need_run()
cfg = ctx.hm.cfg
st.title(t("tr.title"))
snaps = cached.snapshots(str(ctx.path), ctx.stamp)
mlm = snaps is not None and snaps.metric == "fill_top5"     # a masked LM's playback: blanks, not translations
if mlm:
    st.caption(t("tr.mlm_note"))                            # its own opening: no reference is teacher-forced
else:
    widgets.intro("tr")
rows_note = st.empty()                    # filled once the sentence is chosen
if snaps is None:
    st.info(t("tr.none", name=ctx.name, have=", ".join(cached.with_snapshots()) or "–"))
    st.stop()

origin = cached.playback_origin(ctx.hm.meta)
if origin["from_scratch"]:
    st.caption(t("tr.start_random"))
else:
    others = [m for m in cached.from_scratch_playbacks() if m != ctx.name]
    st.warning(t("tr.start_finetune", base=origin["base"], n=origin["updates"],
                 chain=" → ".join(t("tr.chain_link", name=c["name"], n=c["updates"]) for c in origin["chain"]),
                 others=", ".join(others) or "–"), icon=":material/info:")
n = len(snaps.steps)
if st.session_state.get("tr_key") != (ctx.name, ctx.stamp):        # another checkpoint: start at step 0
    if st.session_state.get("tr_key") is not None:                    # (a link's first view keeps its step)
        st.session_state["tr_step"] = 0
    st.session_state.update(tr_key=(ctx.name, ctx.stamp), tr_playing=False)
i = st.session_state["tr_step"] = min(st.session_state.get("tr_step", 0), n - 1)

c = st.columns([3, 3, 1, 1])
j = widgets.select(c[0], t("tr.sentence_mlm" if mlm else "tr.sentence"), list(range(len(snaps.texts))), "tr_text",
                   format_func=in_language(callbacks.snapshot_pair(snaps)))
block, layer, head = widgets.block_layer_head([c[1], c[2], c[3]], cfg, "tr", default_block="decoder.self_attn")


st.session_state["tr_slider"] = i
b = st.columns([6, 1, 1, 1])
b[0].select_slider(t("tr.step"), options=list(range(n)), key="tr_slider", on_change=callbacks.tr_slid, args=(n,),
                   format_func=in_language(callbacks.snapshot_step(snaps)))
b[1].button(t("dc.back"), on_click=callbacks.tr_set, args=(n, i - 1), disabled=i == 0, key="tr_back", icon=":material/chevron_left:")
b[2].button(t("dc.next"), on_click=callbacks.tr_set, args=(n, i + 1), disabled=i >= n - 1, key="tr_next",
            icon=":material/chevron_right:", icon_position="right")
playing = st.session_state["tr_playing"] = st.session_state.get("tr_playing", False) and i < n - 1   # ended
widgets.play_pause(b[3], playing, "tr", callbacks.tr_play, callbacks.tr_pause, args=(i, n))

step, bleu, loss = snaps.steps[i], snaps.bleu[i], snaps.loss[i]
m = st.columns(4)
m[0].metric(t("tr.m_step"), f"{step:,}")
m[1].metric(t("tr.m_loss"), "–" if loss is None else f"{loss:.3f}")
score_label = t("tr.m_fill_top5" if mlm else "tr.m_bleu", n=snaps.bleu_n)
m[2].metric(score_label, f"{bleu:.1f}")
m[3].metric(t("tr.m_shipped"), f"{snaps.shipped_step:,}" if snaps.shipped_step is not None else "–")
st.markdown(f"**{t('tr.fills' if mlm else 'tr.translation')}**")
widgets.output(snaps.translations[i][j] or t("ov.empty_output"), "translation")

if snaps.tgt_pieces[j]:                 # decoder rows: what each teacher-forced row is trained to predict
    nexts = piece_labels.next_pieces(snaps.tgt_pieces[j])
    example = piece_labels.example_row(snaps.tgt_pieces[j], nexts, snaps.prompt_len[j] - 1)[0]
    rows_note.caption(t("rows.intro_tr", row=widgets.md_escape(example)))
q_pieces, k_pieces = snaps.axes(j, block)
name = patterns.hook_name(block, layer, "hook_pattern")
pats = snaps.stack(i, j, block)                                                     # (L, H, q, k)
mat = patterns.reduce_heads(pats[layer], head) if isinstance(head, str) else pats[layer, head]
widgets.show(heatmaps.attention_heatmap(mat, q_pieces, k_pieces, t("tr.heatmap", name=name, head=widgets.head_label(head),
                                     step=step), t("axis.key"),
                                     t("axis.query" if block == "encoder.self_attn" else "axis.query_ref"), t("cb.weight")),
             key="tr_heat")
widgets.show(heatmaps.model_view(patterns.model_view_tiles(pats, 32), t("tr.model_view", step=step,
             block=widgets.block_label(block)), t("axis.layer"), t("axis.head"),
             selected=(layer, head) if isinstance(head, int) else None, colorbar=t("at.model_view_cb"),
             hover=t("at.model_view_hover")), key="tr_model_view")
widgets.show(model_figures.training_curves(snaps.steps, snaps.loss, snaps.bleu, step, t("tr.curves_mlm" if mlm else "tr.curves"),
                                          snaps.loss_curve, t("tr.x"), t("tr.m_loss"), score_label, snaps.shipped_step,
                                          t("tr.m_shipped")), key="tr_curves")
st.caption(t("tr.how", n=n))

st.subheader(t("tr.roles"))
st.caption(t("tr.roles_intro", n=len(snaps.texts), th=summaries.ROLE_THRESHOLD))
roles = cached.training_roles(str(ctx.path), ctx.stamp)
labels = {r: t("tr.roles_none") if not r else t(f"hs.role.{r}") for r in summary_figures.ROLE_ORDER}
block_name = widgets.block_label(block)
widgets.show(summary_figures.roles_over_training(roles, block, labels, t("tr.roles_fig", block=block_name),
                                                 t("tr.roles_x"), t("tr.roles_y"), current=i), key="tr_roles")
first = summaries.first_appearances(roles, block)
if first:
    st.markdown(t("tr.roles_first") + "\n" + "\n".join(
        t("tr.roles_first_row", role=labels[r["role"]], layer=r["layer"], head=r["head"], step=r["step"],
          evidence=r["evidence"], final=r["final_evidence"]) for r in first))
else:
    st.caption(t("tr.roles_nothing", block=block_name, th=summaries.ROLE_THRESHOLD))

if playing:      # one snapshot per rerun until the last
    if i < n - 1:
        time.sleep(0.7)
        st.session_state["tr_step"] = i + 1
        st.rerun()
    st.session_state["tr_playing"] = False
