"""Small defects once found on the pages, each checked through the page that showed it (AppTest on the tiny checkpoints):
Play ends as Play, probabilities are formatted one way, the knock-out ranking is sorted and its grids share
one scale, head statistics show role and evidence first, and the Chinese interface names blocks in Chinese."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from app_util import ZH, array, by_key, figure, figures, open_app
from viz_transformer import decode, DecodeSettings, load_checkpoint

from test_app_architectures import snap_root  # noqa: F401  (a tiny checkpoint with training snapshots)
from test_core_train import pairs_tsv  # noqa: F401


# -- Play: once the last step is drawn, the button says Play again ----------------------------------
def test_decoding_play_ends_with_a_play_button(env):
    n = len(decode(load_checkpoint(env / "tiny-zh-en"), ZH, DecodeSettings(max_new_tokens=20)).steps)
    at = open_app("viz_explorer/pages/step/decoding.py")
    assert at.button(key="dc_play").label == "Play"
    at.session_state["dc_step"] = n - 1
    at.button(key="dc_play").click().run(timeout=60)           # plays the last step, then stops
    assert f"Step {n} of {n}" in at.get("progress")[0].proto.text
    assert at.button(key="dc_play").label == "Play"
    assert at.session_state["dc_playing"] is False


@pytest.mark.train          # snap_root trains a tiny prefix LM
def test_training_play_ends_with_a_play_button(snap_root, ckpt_root, monkeypatch):  # noqa: F811
    shutil.copytree(ckpt_root / "tiny-zh-en", snap_root / "tiny-zh-en", dirs_exist_ok=True)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(snap_root))
    at = open_app("viz_explorer/pages/train/attention_over_training.py", "tiny-trained")
    n = len(at.select_slider(key="tr_slider").options)
    at.session_state["tr_step"] = n - 2
    by_key(at.button, "tr_play").click().run(timeout=60)
    assert at.session_state["tr_step"] == n - 1
    assert by_key(at.button, "tr_play").label == "Play"


# -- probabilities: one format everywhere -----------------------------------------------------------
@pytest.mark.parametrize("p, shown", [(1.0, "1.00"), (0.5, "0.500"), (0.123456, "0.123"), (0.0123456, "0.0123"),
                                      (0.001, "0.00100"), (0.000999, "9.99e-4"), (0.00042, "4.20e-4"),
                                      (1.2345e-5, "1.23e-5"), (1e-6, "1.00e-6"), (9.99e-7, "<1e-6"),
                                      (2e-13, "<1e-6"), (0.0, "0"), (float("nan"), "–")])
def test_fmt_prob(p, shown):
    from viz_transformer.plots.numbers import fmt_prob
    assert fmt_prob(p) == shown


def _close(shown: str, p: float) -> bool:
    """A shown probability reads back within its 3 significant figures (or is below 1e-6)."""
    if shown == "<1e-6":
        return p < 1e-6
    return abs(float(shown) - p) <= 0.005 * p + 1e-12


def test_decoding_shows_a_sampled_tokens_probability_to_3_significant_figures(env):
    hm = load_checkpoint(env / "tiny-zh-en")
    ref = decode(hm, ZH, DecodeSettings("sample", temperature=2.0, top_k=0, top_p=1.0, seed=0, max_new_tokens=20))
    at = open_app("viz_explorer/pages/step/decoding.py")
    by_key(at.button_group, "dc_strategy").set_value("sample").run(timeout=60)
    by_key(at.slider, "dc_temp").set_value(2.0).run(timeout=60)
    at.button(key="dc_next").click().run(timeout=60)
    line = next(m.value for m in at.markdown if "Step 1:" in m.value)
    shown = re.search(r"\(p = ([^)]+)\)", line.replace("\\", "")).group(1)
    assert _close(shown, ref.steps[0].prob), (shown, ref.steps[0].prob)
    bars = figure(at, "Top candidates at step 1")["data"][0]
    assert all(_close(s, c.prob) for s, c in zip(bars["text"], ref.steps[0].candidates))


def test_lens_table_and_grid_show_probabilities_in_the_one_format(env):
    from viz_transformer.run import lenses
    from viz_transformer.plots.numbers import fmt_prob
    hm = load_checkpoint(env / "tiny-zh-en")
    run = hm.run(ZH)
    view = lenses.lens_view(hm, run, lenses.logit_lens(hm, run))
    at = open_app("viz_explorer/pages/step/logit_lens.py")
    table = at.dataframe[0].value
    final = [c for c in table.columns if c.startswith("P(")][0]
    col = lenses.view_column(view, view.output_start)
    expect = [float(p) for p in reversed(col["final_prob"].tolist())]        # the table lists the last layer first
    assert [str(s) for s in table[final]] == [fmt_prob(p) for p in expect]
    assert all(_close(str(s), p) for s, p in zip(table[final], expect))
    grid = figure(at, "")["data"][0]
    assert all(_close(s, float(p)) for row_s, row_p in zip(grid["customdata"], array(grid["z"]).tolist())
               for s, p in zip(row_s, row_p))


# -- knock-out ranking: sorted, one colour scale -----------------------------------------------------
def test_knockout_ranking_is_sorted_and_its_grids_share_one_scale(env):
    at = open_app("viz_explorer/pages/experiment/knockout.py")
    at.button(key="ko_rank").click().run(timeout=60)
    table = at.dataframe[0].value
    delta = table["Δ log-probability"].to_numpy()
    assert (np.diff(delta) >= 0).all()                       # the largest drop (most negative) first
    grids = [f for f in figures(at) if "Δ log-probability per head" in f["layout"]["title"]["text"]]
    assert len(grids) == 3
    scales = {(g["data"][0]["zmin"], g["data"][0]["zmax"]) for g in grids}
    assert len(scales) == 1
    zmin, zmax = scales.pop()
    assert zmax == -zmin and np.isclose(zmax, np.abs(delta).max(), rtol=1e-6)


# -- head statistics: role and evidence in view, no blank grid, one scale -----------------------------
def test_head_stats_table_shows_role_and_evidence_first_pinned_in_view(env):
    import json
    at = open_app("viz_explorer/pages/experiment/head_stats.py")
    proto = at.dataframe[0].proto
    assert list(proto.column_order)[:5] == ["block", "layer", "head", "role", "evidence"]
    columns = json.loads(proto.columns)
    first = [columns[c] for c in ("block", "layer", "head", "role", "evidence")]
    assert all(c.get("pinned") for c in first)
    assert sum(c["width"] for c in first) <= 800            # beside the sidebar at 1400 px, no horizontal scrolling


def test_head_stats_grid_of_a_statistic_cross_attention_lacks_is_a_note(env):
    at = open_app("viz_explorer/pages/experiment/head_stats.py")
    def stat_grids():           # the statistic's grids, not the attention-sink grids under them
        return [f for f in figures(at) if "position 0" not in f["layout"]["title"]["text"].replace("<br>", " ")]

    by_key(at.selectbox, "hs_stat").set_value("prev_token").run(timeout=60)
    titles = [f["layout"]["title"]["text"] for f in stat_grids()]
    assert len(titles) == 2 and not any("cross-attention" in s for s in titles), titles
    assert any("No previous token grid for the cross-attention" in c.value for c in at.caption)
    by_key(at.selectbox, "hs_stat").set_value("entropy").run(timeout=60)
    grids = stat_grids()
    assert len(grids) == 3
    assert len({g["data"][0]["zmax"] for g in grids}) == 1        # one scale for the three blocks


# -- the Chinese interface names blocks in Chinese in its tables --------------------------------------
def _open_zh(page: str, text: str = ZH):
    from streamlit.testing.v1 import AppTest
    from app_util import APP
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["lang"] = "zh"
    at.session_state["ckpt"] = "tiny-zh-en"
    at.session_state["text"] = text
    at.run(timeout=90)
    at.switch_page(page)
    at.run(timeout=90)
    assert not at.exception, [e.value for e in at.exception]
    return at


RAW = re.compile(r"(encoder|decoder)(\.\d+)?\.(self|cross)_attn")


@pytest.mark.parametrize("page, press", [("viz_explorer/pages/experiment/knockout.py", "ko_rank"), ("viz_explorer/pages/experiment/head_stats.py", None),
                                         ("viz_explorer/pages/experiment/patching.py", None)])
def test_chinese_tables_name_blocks_in_chinese(env, page, press):
    from viz_explorer.kit.strings_zh import ZH as ZH_STRINGS
    at = _open_zh(page)
    if "patching" in page:                    # a second text the tiny tokenizer cuts into as many pieces
        at.session_state["pt_text_translator"] = "我是一名工作师。"
        at.run(timeout=90)
    if press:
        at.button(key=press).click().run(timeout=90)
    tables = [d.value for d in at.dataframe]
    assert tables, [w.value for w in at.warning] + [c.value for c in at.text]
    for df in tables:
        for col in df.columns:
            if col == ZH_STRINGS["pt.col.hook"]:            # the capture name is the point there
                continue
            raw = [v for v in map(str, df[col]) if RAW.search(v)]
            assert not raw, (page, col, raw[:3])
    blocks = {ZH_STRINGS[f"block.{b}"] for b in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")}
    cols = [(df, c) for df in tables for c in (ZH_STRINGS["ko.col.block"], "block") if c in df.columns]   # or config-labelled
    assert cols and all(set(df[c]) <= blocks for df, c in cols)
