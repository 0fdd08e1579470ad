"""A run's validation curve in meta.json, and whether it has plateaued (less than 0.5 BLEU gained
over the last 20% of the updates)."""
import json

from viz_transformer.training.evaluation import plateau
from viz_transformer.training.evaluation import record_curve


def _history(bleus, every=100):
    return [{"bleu": b, "epoch": i + 1, "step": (i + 1) * every} for i, b in enumerate(bleus)]


def test_a_linear_rise_gains_its_slope_times_the_last_fifth():
    h = _history([float(i) for i in range(1, 11)])          # 1 BLEU per 100 steps, steps 100..1000
    p = plateau(h)
    assert p["from_step"] == 800 and p["to_step"] == 1000
    assert p["gain"] == 2.0 and not p["plateaued"]           # 10 (step 1000) - 8 (step 800)


def test_a_flat_tail_and_a_late_dip_have_plateaued():
    h = _history([5, 9, 12, 13, 13.2, 13.3, 13.4, 13.6, 13.5, 13.1])
    p = plateau(h)
    assert p["plateaued"] and p["gain"] == 0.0               # the best (13.6) came at step 800, inside the cut


def test_perplexity_counts_a_drop_as_the_gain():
    h = [{"perplexity": v, "step": s} for v, s in ((40, 100), (30, 200), (26, 300), (25.5, 400), (24.0, 500))]
    p = plateau(h)
    assert p["metric"] == "perplexity" and p["gain"] == 1.5 and not p["plateaued"]   # 25.5 at step 400 -> 24.0


def test_one_epoch_is_no_curve():
    assert plateau(_history([3.0])) is None


def test_record_curve_writes_the_states_history_into_meta(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir(), out.mkdir()
    h = _history([1.0, 4.0, 6.0, 6.2, 6.3])
    (work / "state.json").write_text(json.dumps({"epoch": 5, "history": h}))
    (out / "meta.json").write_text(json.dumps({"task": "translation", "val": h[-1]}))
    record_curve(out, work)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["curve"] == h and meta["task"] == "translation"
    assert meta["plateau"]["gain"] == round(6.3 - 6.2, 3)   # the cut: step 400 (80% of 500) and meta["plateau"]["plateaued"]
