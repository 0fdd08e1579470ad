"""Rollout, attribution and head statistics against hand computations on constructed patterns and full
recomputes; export round trips; the CLI's report and stats."""
from __future__ import annotations

import io
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import TATOEBA
from viz_transformer import export
from viz_transformer.training import corpora
from viz_transformer.analysis import summaries
from viz_transformer.core.hooks import Cache
from viz_transformer.report import quantize, unquantize

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _cache(part: str, patterns: list[torch.Tensor]) -> Cache:
    """A Cache holding `{part}.{i}.self_attn.hook_pattern` = patterns[i] ([head, q, k], batch added)."""
    return Cache({f"{part}.{i}.self_attn.hook_pattern": p.unsqueeze(0) for i, p in enumerate(patterns)},
                 {part: len(patterns)})


def _random_rows(*shape, seed=0) -> torch.Tensor:
    return torch.softmax(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), -1)


# -- rollout ------------------------------------------------------------------------------------------
def test_rollout_of_identity_attention_is_the_identity():
    eye = torch.eye(5).expand(4, 5, 5)                    # every head attends to itself
    r = summaries.rollout(_cache("encoder", [eye, eye, eye]), "encoder")
    assert torch.allclose(r, torch.eye(5), atol=1e-6)


def test_rollout_of_two_layers_is_the_hand_product():
    a1, a2 = _random_rows(3, 4, 4, seed=1), _random_rows(3, 4, 4, seed=2)
    # by hand: Â = ½·mean_heads(A) + ½·I (its rows already sum to 1), rollout = Â2 · Â1
    hat1 = 0.5 * a1.double().mean(0) + 0.5 * torch.eye(4, dtype=torch.float64)
    hat2 = 0.5 * a2.double().mean(0) + 0.5 * torch.eye(4, dtype=torch.float64)
    expected = np.asarray(hat2) @ np.asarray(hat1)
    r = summaries.rollout(_cache("decoder", [a1, a2]), "decoder")
    assert np.allclose(r.numpy(), expected, atol=1e-6)
    assert not np.allclose(r.numpy(), np.asarray(hat1) @ np.asarray(hat2), atol=1e-4)   # order matters


def test_rollout_rows_sum_to_one_on_a_real_run(tiny_translator):
    run = tiny_translator.run("我是一名工程师。")
    for part, n in (("encoder", len(run.src_pieces)), ("decoder", len(run.tgt_pieces))):
        r = summaries.rollout(run.cache, part)
        assert r.shape == (n, n)
        assert torch.allclose(r.sum(-1), torch.ones(n), atol=1e-5)
        assert (r >= 0).all()
    # causal decoder: rollout keeps the mask (nothing flows from a later position)
    assert torch.allclose(torch.triu(summaries.rollout(run.cache, "decoder"), 1), torch.zeros(1), atol=1e-7)


def test_source_attribution_is_last_cross_attention_times_encoder_rollout(tiny_translator):
    run = tiny_translator.run("我爱你。")
    cross = run.cache["decoder.1.cross_attn.hook_pattern"][0].double().mean(0).numpy()
    enc = [run.cache[f"encoder.{i}.self_attn.hook_pattern"][0].double().mean(0).numpy() for i in range(2)]
    hat = [0.5 * a + 0.5 * np.eye(a.shape[0]) for a in enc]
    expected = cross @ (hat[1] @ hat[0])
    got = summaries.source_attribution(run.cache).numpy()
    assert got.shape == (len(run.tgt_pieces), len(run.src_pieces))
    assert np.allclose(got, expected, atol=1e-5)
    assert np.allclose(got.sum(-1), 1, atol=1e-5)


def test_source_attribution_needs_an_encoder(tiny_lm):
    with pytest.raises(ValueError, match="encoder-decoder"):
        summaries.source_attribution(tiny_lm.run("Once upon a time").cache)


# -- head statistics on constructed patterns ---------------------------------------------------------
def _stats(p, allowed=None, q_valid=None, punct=None, same=True):
    B, H, Q, K = p.shape
    allowed = torch.ones(B, 1, Q, K, dtype=torch.bool) if allowed is None else allowed
    q_valid = torch.ones(B, Q, dtype=torch.bool) if q_valid is None else q_valid
    punct = torch.zeros(B, K, dtype=torch.bool) if punct is None else punct
    return {k: v[0, 0].item() for k, v in summaries.pattern_stats(p, allowed, q_valid, punct, same).items()}


def test_identity_pattern_is_all_self_at_distance_zero():
    s = _stats(torch.eye(6)[None, None])
    assert s["self"] == pytest.approx(1) and s["mean_distance"] == pytest.approx(0)
    assert s["entropy"] == pytest.approx(0) and s["max_weight"] == pytest.approx(1)
    assert s["prev_token"] == pytest.approx(0)
    assert s["first_token"] == pytest.approx(1 / 6)                  # only row 0 puts weight on key 0


def test_shifted_identity_is_previous_token_at_distance_one():
    n = 6
    p = torch.zeros(n, n)
    p[0, 0] = 1.0                                                     # row 0 has no previous token
    for q in range(1, n):
        p[q, q - 1] = 1.0
    s = _stats(p[None, None])
    assert s["prev_token"] == pytest.approx(1)                        # over q ≥ 1
    assert s["mean_distance"] == pytest.approx((n - 1) / n)           # 1 on every row but row 0
    assert s["self"] == pytest.approx(1 / n)


def test_uniform_over_n_keys_has_entropy_ln_n_and_padding_rows_are_left_out():
    n, pad = 5, 3
    p = torch.zeros(n + pad, n + pad)
    p[:n, :n] = 1 / n                                                 # real rows: uniform over the real keys
    p[n:, 0] = 1.0                                                    # padding rows: one-hot (would lower entropy)
    allowed = torch.zeros(1, 1, n + pad, n + pad, dtype=torch.bool)
    allowed[..., :n] = True
    valid = torch.tensor([[True] * n + [False] * pad])
    s = _stats(p[None, None], allowed, valid)
    assert s["entropy"] == pytest.approx(math.log(n))
    assert s["max_entropy"] == pytest.approx(math.log(n))
    assert s["max_weight"] == pytest.approx(1 / n)
    assert s["last_token"] == pytest.approx(1 / n)                    # the last allowed key is n - 1, not padding
    # mean |q - k| by hand over the real rows only
    assert s["mean_distance"] == pytest.approx(np.mean([np.mean([abs(q - k) for k in range(n)]) for q in range(n)]))


def test_first_last_and_punctuation_weights_by_hand():
    p = torch.tensor([[0.7, 0.1, 0.2],
                      [0.2, 0.2, 0.6],
                      [0.1, 0.3, 0.6]])[None, None]
    punct = torch.tensor([[False, True, False]])
    s = _stats(p, punct=punct, same=False)
    assert s["first_token"] == pytest.approx((0.7 + 0.2 + 0.1) / 3)
    assert s["last_token"] == pytest.approx((0.2 + 0.6 + 0.6) / 3)
    assert s["punctuation"] == pytest.approx((0.1 + 0.2 + 0.3) / 3)
    assert math.isnan(s["self"]) and math.isnan(s["prev_token"])      # cross-attention has neither


def test_head_stats_of_a_run_match_a_recompute_of_one_head(tiny_translator):
    run = tiny_translator.run("他是我的朋友。")
    df = summaries.head_stats(run)
    assert len(df) == 3 * 2 * 4                                       # blocks × layers × heads
    row = df[(df["block"] == "decoder.cross_attn") & (df["layer"] == 1) & (df["head"] == 2)].iloc[0]
    p = run.cache["decoder.1.cross_attn.hook_pattern"][0, 2].double().numpy()      # (T, S)
    ent = np.mean([-sum(x * math.log(x) for x in r if x > 0) for r in p])
    dist = np.mean([sum(p[q, k] * abs(q - k) for k in range(p.shape[1])) for q in range(p.shape[0])])
    punct = [k for k, piece in enumerate(run.src_pieces) if piece.replace("▁", "") in ("。", ".")]
    assert row.entropy == pytest.approx(ent, rel=1e-6)
    assert row.mean_distance == pytest.approx(dist, rel=1e-6)
    assert row.last_token == pytest.approx(p[:, -1].mean(), rel=1e-6)          # the source's [end]
    assert row.punctuation == pytest.approx(p[:, punct].sum(-1).mean(), rel=1e-6)


def test_corpus_stats_are_the_mean_of_each_sentence_alone(tiny_translator):
    texts = ["我是学生。", "今天天气很好。", "我们明天去北京。"]          # different lengths: padding in the batch
    got = summaries.corpus_head_stats(tiny_translator, texts, batch_size=3)
    alone = pd.concat([summaries.head_stats(tiny_translator.run(t)) for t in texts])
    want = alone.groupby(["block", "layer", "head"], sort=False)[list(summaries.STATS)].mean().reset_index()
    for stat in summaries.STATS:
        assert np.allclose(got[stat].to_numpy(), want[stat].to_numpy(), atol=1e-5, equal_nan=True), stat
    assert (got["n_sentences"] == 3).all()


def test_corpus_stats_report_progress_and_refuse_an_empty_corpus(tiny_lm):
    seen = []
    summaries.corpus_head_stats(tiny_lm, ["Once upon a time.", "The cat sat.", "Hi."], lambda d, n: seen.append((d, n)),
                                batch_size=2)
    assert seen == [(2, 3), (3, 3)]
    with pytest.raises(ValueError, match="no sentences"):
        summaries.corpus_head_stats(tiny_lm, ["  ", ""])


def test_roles_name_the_dominant_statistic_with_its_number():
    base = dict(block="encoder.self_attn", layer=0, entropy=1.0, mean_distance=1.0, punctuation=0.0,
                max_weight=0.5, max_entropy=2.0)
    df = pd.DataFrame([dict(base, head=0, self=0.1, prev_token=0.8, first_token=0.05, last_token=0.05),
                       dict(base, head=1, self=0.1, prev_token=0.1, first_token=0.7, last_token=0.1),
                       dict(base, head=2, self=0.2, prev_token=0.2, first_token=0.2, last_token=0.2, entropy=1.9),
                       dict(base, head=3, self=0.3, prev_token=0.2, first_token=0.1, last_token=0.3)])
    out = summaries.head_roles(df)
    assert list(out.role) == ["previous-token", "first-token sink", "broad", ""]
    assert out.evidence[0] == "prev_token = 0.80" and out.evidence[1] == "first_token = 0.70"
    assert "1.90 of 2.00" in out.evidence[2] and "0.30" in out.evidence[3]


def test_built_in_corpora_are_held_out_and_big_enough(request):
    from viz_transformer.training import data as D
    zh, en = corpora.load("zh"), corpora.load("en")
    assert len(zh) >= 200 and len(en) >= 200 and len(set(zh)) == len(zh)
    request.getfixturevalue("training_data")      # the rest needs ../shared/data: skips without it
    pairs = D.read_pairs(TATOEBA)
    seen = {s for s, _ in D.split(pairs, 1234, 1500, 1000)[0]} | {s for s, _ in D.split_by_source(pairs, 1234, 1500, 1000)[0]}
    assert not seen & set(zh)


# -- export -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [".npz", ".json"])
def test_export_round_trips_every_tensor_and_the_tokens(tiny_translator, fmt):
    run = tiny_translator.run("我是<b>学生</b>。")
    tensors, meta = export.read_run(export.run_bytes(run, fmt), fmt)
    assert set(tensors) == set(run.cache.keys())
    for name, t in run.cache.items():
        assert tensors[name].dtype == t.dtype and torch.equal(tensors[name], t), name
    assert meta["tokens.src"] == run.src_pieces and meta["tokens.tgt"] == run.tgt_pieces
    assert meta["output"] == run.output
    with pytest.raises(ValueError, match=".npz or .json"):
        export.run_bytes(run, ".txt")


@pytest.mark.parametrize("model", ["tiny_translator", "tiny_lm"])
def test_a_run_over_the_limit_leaves_out_what_read_run_computes_back(model, request, monkeypatch):
    """A lean run's .npz over LIMIT holds no scores or patterns; read_run recomputes them, equal to a full
    capture of the same text (the reference: a plain run, every tensor captured as the model computed it)."""
    hm = request.getfixturevalue(model)
    full, lean = hm.run("我是学生。 I am a student."), hm.run("我是学生。 I am a student.", lean=True)
    assert export.tensor_nbytes(lean) == sum(t.numel() * t.element_size() for _, t in full.cache.items())
    monkeypatch.setattr(export, "LIMIT", export.tensor_nbytes(lean) - 1)
    data = export.npz_bytes(lean)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:           # numpy's own reader: an ordinary .npz
        left = {str(x) for x in z["recomputed"]}
        assert left and all(n.endswith(("hook_pattern", "hook_scores")) for n in left) and not left & set(z.files)
    tensors, _ = export.read_run(data, ".npz")
    assert set(tensors) == set(full.cache.keys())
    for name, t in full.cache.items():
        assert tensors[name].dtype == t.dtype and torch.allclose(tensors[name], t, atol=1e-6), name
    with pytest.raises(ValueError, match="use .npz"):
        export.json_bytes(lean)


def test_quantized_weights_come_back_within_half_a_step():
    z = np.array([[0.0, 0.25, 1.0], [np.nan, 0.123456, 0.999]])
    back = unquantize(quantize(z, 8))
    assert np.isnan(back[1, 0])
    ok = ~np.isnan(z)
    assert np.all(np.abs(back[ok] - z[ok]) <= 0.5 / 254 + 1e-12)
    with pytest.raises(ValueError, match="weights in"):
        quantize(np.array([[2.0]]))


@pytest.mark.slow          # subprocesses
def test_cli_writes_a_report_and_stats(ckpt_root, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("我是学生。\n\n我爱你。\n", encoding="utf-8")
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}

    def cli(*a):
        return subprocess.run([sys.executable, "-m", "viz_transformer", *map(str, a)], cwd=ROOT, capture_output=True,
                              text=True, env=env)
    r = cli("stats", "--checkpoint", ckpt_root / "tiny-zh-en", "--corpus", corpus, "--out", tmp_path / "s.csv", "--quiet")
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(tmp_path / "s.csv", encoding="utf-8-sig")
    assert len(df) == 3 * 2 * 4 and (df["n_sentences"] == 2).all() and {"role", "evidence"} <= set(df.columns)
    r = cli("report", "--checkpoint", ckpt_root / "tiny-zh-en", "--text", "我爱你。", "--head", "decoder.1.cross_attn:3",
            "--out", tmp_path / "r.html")
    assert r.returncode == 0, r.stderr
    assert "cross-attention (decoder → encoder), layer 1, head 3" in (tmp_path / "r.html").read_text(encoding="utf-8")
    r = cli("report", "--checkpoint", ckpt_root / "tiny-zh-en", "--text", "我爱你。", "--head", "decoder.1.cross_attn:9",
            "--out", tmp_path / "r.html")
    assert r.returncode == 2 and "4 heads per layer" in r.stderr
    r = cli("stats", "--checkpoint", ckpt_root / "tiny-zh-en", "--corpus", tmp_path / "missing.txt", "--out", tmp_path / "s.csv")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_the_report_labels_each_decoder_row_by_what_it_predicts(tiny_translator):
    from viz_transformer.analysis import piece_labels
    from viz_transformer.report import report_data
    run = tiny_translator.run("我是学生。", max_new_tokens=6)
    heads = [("encoder.self_attn", 0, 0), ("decoder.cross_attn", 0, 1)]
    figs = [b for s in report_data(tiny_translator, run, heads)["sections"] for b in s.get("blocks", [])
            if b.get("kind") == "figure"]
    ys = {f["figure"]["layout"]["title"]["text"]: f["figure"]["data"][0].get("y") for f in figs}
    enc = next(y for t, y in ys.items() if t.startswith("encoder self-attention, layer 0"))
    cross = next(y for t, y in ys.items() if t.startswith("cross-attention (decoder → encoder), layer 0"))
    assert enc == [f"{i}:{p}" for i, p in enumerate(run.src_pieces)]
    assert cross == [f"{i}:{p} → {n}" for i, p, n in zip(range(99), run.tgt_pieces, run.predicted)]
    assert cross == [f"{i}:{q}" for i, q in enumerate(piece_labels.query_labels(run, "decoder.cross_attn"))]


def test_a_report_made_on_a_phone_is_laid_out_for_a_desktop(tiny_translator):
    """The app keeps one report per text for every session: one asked for on a phone is the desktop's."""
    import json as _json
    from viz_transformer import report
    from viz_transformer.plots import figure_rules
    run = tiny_translator.run("我是一名工程师。")
    desktop = report.report_data(tiny_translator, run, when="now")
    with figure_rules.screen(figure_rules.PHONE_PX):
        phone = report.report_data(tiny_translator, run, when="now")
        assert figure_rules.figure_px() == figure_rules.PHONE_PX
    assert _json.dumps(phone, sort_keys=True) == _json.dumps(desktop, sort_keys=True)


def test_corpus_stats_on_threads_equal_one_threads(tiny_translator, tiny_lm):
    for hm, texts in ((tiny_translator, ["我是学生。", "今天天气很好。", "我们明天去北京。", "你好", "他是我的朋友。"]),
                      (tiny_lm, ["Once upon a time.", "The cat sat.", "Hi.", "A dog ran home quickly."])):
        seen = []
        on_threads = summaries.corpus_head_stats(hm, texts, lambda d, n: seen.append(d), batch_size=2, workers=3)
        alone = summaries.corpus_head_stats(hm, texts, batch_size=2)
        pd.testing.assert_frame_equal(on_threads, alone)           # the same sums, added in the same order
        assert seen[-1] == len(texts) and seen == sorted(seen)
