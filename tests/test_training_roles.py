"""Roles as they form: the head statistics of training snapshots against a full recompute with the shipped
weights, the first-appearance rule on constructed tables, and the figure's cells against the table."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from viz_transformer import load_checkpoint
from viz_transformer.analysis import summaries
from viz_transformer.plots import summary_figures
from viz_transformer.training.snapshots import load_training_snapshots

ROOT = Path(__file__).resolve().parent.parent
WITH_SNAPSHOTS = [p.name for p in sorted((ROOT / "checkpoints").iterdir())
                  if (p / "training_snapshots.json").is_file()]


@pytest.mark.parametrize("name", WITH_SNAPSHOTS)
def test_snapshot_stats_at_the_shipped_step_equal_a_recompute_with_the_shipped_weights(name):
    """The last snapshot is taken with the weights that ship (teacher-forced on the fixed pairs): its head
    statistics, from stored float16 patterns and a reconstructed mask, equal head_stats of fresh runs of the
    checkpoint on the same pairs (which read the model's own captured mask), averaged over the pairs."""
    snaps = load_training_snapshots(ROOT / "checkpoints" / name)
    i = snaps.shipped_index
    assert i is not None
    ours = summaries.snapshot_head_stats(snaps)
    ours = ours[ours.step_index == i].drop(columns=["step_index", "step"]).reset_index(drop=True)
    hm = load_checkpoint(ROOT / "checkpoints" / name)
    tables = [summaries.head_stats(hm.run(text, target=ref or None))      # a masked LM's: no reference
              for text, ref in zip(snaps.texts, snaps.targets)]
    ref = pd.concat(tables).groupby(["block", "layer", "head"], sort=False).mean().reset_index()
    merged = ours.merge(ref, on=["block", "layer", "head"], suffixes=("", "_ref"))
    assert len(merged) == len(ours) == len(ref)
    for stat in ("entropy", "first_token", "last_token", "self", "prev_token", "max_weight", "max_entropy"):
        a, b = merged[stat].to_numpy(), merged[f"{stat}_ref"].to_numpy()
        assert np.array_equal(np.isnan(a), np.isnan(b)), stat
        ok = ~np.isnan(a)
        assert np.abs(a[ok] - b[ok]).max() < 5e-3, stat            # float16 storage of the patterns


def test_roles_over_training_labels_every_head_at_every_step_with_head_roles_rule():
    snaps = load_training_snapshots(ROOT / "checkpoints" / WITH_SNAPSHOTS[0])
    table = summaries.roles_over_training(snaps)
    stats = summaries.snapshot_head_stats(snaps)
    n_heads = len(stats) // len(snaps.steps)
    assert len(table) == len(snaps.steps) * n_heads
    again = summaries.head_roles(stats)                      # the rule applied row by row, independently
    assert list(table.role) == list(again.role)
    prev = stats.prev_token.to_numpy()
    labelled = table.role.eq("previous-token").to_numpy()
    assert (prev[labelled] >= summaries.ROLE_THRESHOLD).all()
    assert np.allclose(table.evidence_value[labelled], prev[labelled])


def _table(rows):
    return pd.DataFrame([{"step_index": i, "step": 10 * i, "block": "encoder.self_attn", "layer": ly, "head": h,
                          "role": r, "evidence": f"e{i}{ly}{h}"} for i, ly, h, r in rows])


def test_first_appearance_is_where_a_head_takes_its_final_role_for_good():
    rows = [(i, 0, 0, r) for i, r in enumerate(["", "self", "", "self", "self"])]              # flickers at 1
    rows += [(i, 1, 2, r) for i, r in enumerate(["", "", "previous-token", "previous-token", "previous-token"])]
    rows += [(i, 0, 1, r) for i, r in enumerate(["self", "self", "self", "self", ""])]          # loses it: none
    got = summaries.first_appearances(_table(rows), "encoder.self_attn")
    assert [(g["role"], g["layer"], g["head"], g["step"]) for g in got] == [("previous-token", 1, 2, 20),
                                                                           ("self", 0, 0, 30)]
    assert got[1]["evidence"] == "e300" and got[1]["final_evidence"] == "e400"
    assert summaries.first_appearances(_table(rows), "decoder.self_attn") == []


def test_a_long_run_prints_evenly_spaced_columns_ending_at_the_last():
    for n in (1, 7, 24, 25, 48, 61, 200):
        every = summary_figures.printed_every(n)
        cols = [j for j in range(n) if (n - 1 - j) % every == 0]
        assert cols[-1] == n - 1 and len(cols) <= summary_figures.ROLE_NUMBER_COLUMNS
        assert every == 1 if n <= summary_figures.ROLE_NUMBER_COLUMNS else len(cols) > summary_figures.ROLE_NUMBER_COLUMNS // 2


def test_roles_figure_cells_are_the_tables_roles_and_evidence():
    snaps = load_training_snapshots(ROOT / "checkpoints" / WITH_SNAPSHOTS[0])
    table = summaries.roles_over_training(snaps)
    block = table.block.iloc[0]
    labels = {r: r or "none" for r in summary_figures.ROLE_ORDER}
    fig = summary_figures.roles_over_training(table, block, labels, "roles", "step", "head", current=2)
    hm = fig.data[0]
    t = table[table.block == block]
    n = len(snaps.steps)
    printed = {j for j in range(n) if any(hm.text[i][j] for i in range(len(hm.y)))}
    assert n - 1 in printed and len(printed) <= summary_figures.ROLE_NUMBER_COLUMNS     # room for each number
    assert len(printed) == n if n <= summary_figures.ROLE_NUMBER_COLUMNS else len(printed) > n // 3
    for r in t.sample(20, random_state=0).itertuples(index=False):
        row = list(hm.y).index(f"L{r.layer} H{r.head}")
        assert hm.z[row][r.step_index] == summary_figures.ROLE_ORDER.index(r.role)
        assert hm.text[row][r.step_index] == (f"{r.evidence_value:.2f}" if r.step_index in printed else "")
        assert f"({r.evidence})" in hm.customdata[row][r.step_index]              # every cell's hover has it
    assert list(hm.x) == [str(s) for s in snaps.steps]
    assert list(hm.colorbar.ticktext) == [labels[r] for r in summary_figures.ROLE_ORDER]
    frame = fig.layout.shapes[0]
    assert (frame.x0, frame.x1) == (1.5, 2.5)
