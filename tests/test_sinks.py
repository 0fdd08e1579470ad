"""analysis.sinks against independent references: hand-built patterns whose shares are known, the renormalisation
formula w / (1 − w_sink), a plain loop over a real run of checkpoints/zh-en; the attention page's toggle and the
head statistics page's sink grids through AppTest, in English and Chinese."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from app_util import ZH, array, by_key, figures, open_app
from viz_transformer.analysis.sinks import run_sink_shares, share_of, sink_shares, strongest, without_sink
from viz_transformer.core.hook_names import available_blocks, hook_name, n_layers, per_head
from viz_transformer.plots.summary_figures import sink_grid
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH as ZH_STRINGS

ROOT = Path(__file__).resolve().parent.parent


def fake_cache(block: str, patterns: list[np.ndarray], mask: np.ndarray) -> dict:
    """A cache holding one block's layers: pattern [H, Q, K] per layer, one mask [Q, K] for all."""
    cache = {}
    for layer, p in enumerate(patterns):
        cache[hook_name(block, layer, "hook_pattern")] = torch.tensor(p, dtype=torch.float32)[None]
        cache[hook_name(block, layer, "hook_mask")] = torch.tensor(mask)[None, None]
    return cache


CAUSAL = np.tril(np.ones((4, 4), dtype=bool))
HEAD0 = np.array([[1.0, 0, 0, 0], [0.8, 0.2, 0, 0], [0.6, 0.1, 0.3, 0], [0.4, 0.15, 0.1, 0.35]])
HEAD1 = np.where(CAUSAL, 1.0, 0.0) / CAUSAL.sum(1, keepdims=True)          # uniform over what each row may see


def test_hand_built_causal_shares():
    df = sink_shares(fake_cache("decoder.self_attn", [np.stack([HEAD0, HEAD1])], CAUSAL), "decoder.self_attn", 1)
    assert list(df["head"]) == [0, 1] and set(df["block"]) == {"decoder.self_attn"}
    h0, h1 = df.iloc[0], df.iloc[1]
    # query 0 sees only position 0: no choice, left out; rows 1..3
    assert h0["n_rows"] == 3 and h1["n_rows"] == 3
    assert h0["first_share"] == pytest.approx((0.8 + 0.6 + 0.4) / 3)
    assert h0["top_other"] == 1 and h0["top_other_share"] == pytest.approx((0.2 + 0.1 + 0.15) / 3)
    assert h1["first_share"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert h1["top_other"] == 1 and h1["top_other_share"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert strongest(df)["head"] == 0
    assert share_of(df, 0, 0) == pytest.approx(0.6) and share_of(df, 0, "mean") == pytest.approx(df["first_share"].mean())


def test_hand_built_bidirectional_with_a_padding_key():
    mask = np.ones((3, 4), dtype=bool)
    mask[:, 3] = False                                       # a padding key nobody may see
    p = np.array([[0.5, 0.2, 0.3, 0], [0.1, 0.1, 0.8, 0], [0.9, 0.05, 0.05, 0]])
    df = sink_shares(fake_cache("decoder.cross_attn", [p[None]], mask), "decoder.cross_attn", 1)
    row = df.iloc[0]
    assert row["n_rows"] == 3                                # query 0 may see others here: it counts
    assert row["first_share"] == pytest.approx(1.5 / 3)
    assert row["top_other"] == 2 and row["top_other_share"] == pytest.approx(1.15 / 3)


def test_one_position_has_no_share():
    df = sink_shares(fake_cache("decoder.self_attn", [np.ones((2, 1, 1))], np.ones((1, 1), bool)), "decoder.self_attn", 1)
    assert df["first_share"].isna().all() and (df["top_other"] == -1).all() and (df["n_rows"] == 0).all()
    assert strongest(df) is None


def causal_softmax(rng, H: int, T: int) -> np.ndarray:
    s = rng.normal(size=(H, T, T)) * 3
    s[:, :, 0] += 4                                           # a sink, as trained models have
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_without_sink_renormalises_the_rest():
    p = causal_softmax(np.random.default_rng(0), 3, 6)
    out = without_sink(p, [0])
    assert isinstance(out, np.ndarray) and out.dtype == p.dtype and out.shape == p.shape
    assert np.all(out[..., 0] == 0)
    assert np.all(out[:, 0] == 0)                             # query 0's whole weight was on the sink: stays 0
    rest = 1 - p[..., 0]                                      # what each row had off the sink
    assert np.allclose(out[:, 1:].sum(-1), 1, atol=1e-12)
    assert np.allclose(out[:, 1:, 1:], p[:, 1:, 1:] / rest[:, 1:, None], atol=1e-12)
    assert np.all(out[np.broadcast_to(~np.tril(np.ones((6, 6), bool)), out.shape)] == 0)   # masked stays 0


def test_without_several_sinks_and_torch_in_torch_out():
    p = torch.tensor(causal_softmax(np.random.default_rng(1), 2, 5), dtype=torch.float64)
    out = without_sink(p, [0, 2])
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    assert without_sink(p.float(), [0]).dtype == torch.float32
    ref = p.double().clone()
    ref[..., [0, 2]] = 0
    for h in range(2):
        for q in range(5):
            mass = 1 - float(p[h, q, 0]) - float(p[h, q, 2])
            want = ref[h, q] / mass if mass > 0 else torch.zeros(5, dtype=torch.float64)
            assert torch.allclose(out[h, q], want, atol=1e-9), (h, q)
    with pytest.raises(ValueError, match="0..4"):
        without_sink(p, [5])


@pytest.fixture(scope="module")
def zh_en():
    from viz_transformer import load_checkpoint
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en")
    return hm, hm.run("我是一名工程师。今天天气很好。")


def test_real_run_matches_a_loop(zh_en):
    hm, run = zh_en
    cfg = hm.cfg
    table = run_sink_shares(run, cfg)
    assert len(table) == sum(n_layers(cfg, b) for b in available_blocks(cfg)) * cfg.n_heads
    for block in available_blocks(cfg):
        df = sink_shares(run.cache, block, n_layers(cfg, block))
        for layer in range(n_layers(cfg, block)):
            pat = run.cache[hook_name(block, layer, "hook_pattern")][0].double()
            mask = run.cache[hook_name(block, layer, "hook_mask")][0, 0]
            Q, K = mask.shape
            rows = [q for q in range(Q) if mask[q, 0] and int(mask[q].sum()) > 1]
            if block != "encoder.self_attn" and block != "decoder.cross_attn":
                assert rows == list(range(1, Q))              # causal: every row but query 0
            for h in range(cfg.n_heads):
                got = df[(df["layer"] == layer) & (df["head"] == h)].iloc[0]
                mean = [sum(float(pat[h, q, k]) for q in rows) / len(rows) for k in range(K)]
                assert got["n_rows"] == len(rows)
                assert got["first_share"] == pytest.approx(mean[0], abs=1e-6)
                best = max(range(1, K), key=lambda k: mean[k])
                assert got["top_other_share"] == pytest.approx(mean[best], abs=1e-6)
                assert mean[int(got["top_other"])] == pytest.approx(mean[best], abs=1e-6)
                assert sum(mean) == pytest.approx(1, abs=1e-5)   # the shares over the same rows add up


def test_sink_grid_figure(zh_en):
    hm, run = zh_en
    block = "decoder.self_attn"
    df = sink_shares(run.cache, block, n_layers(hm.cfg, block))
    grid = per_head(df, block, "first_share", n_layers(hm.cfg, block), hm.cfg.n_heads)
    fig = sink_grid(grid, "decoder: share on position 0", colorbar="share").to_plotly_json()
    hm_trace = fig["data"][0]
    assert np.allclose(array(hm_trace["z"]), grid.numpy(), atol=1e-6)
    assert (hm_trace["zmin"], hm_trace["zmax"]) == (0, 1.0)
    assert hm_trace["texttemplate"] == "%{z:.0%}"


# -- the app ------------------------------------------------------------------------------------------------
def flat(s: str) -> str:
    return re.sub(r"<br>|\s", "", s)


def heatmap_of(at, title: str) -> dict:
    found = [f for f in figures(at) if flat(title) in flat(f["layout"]["title"]["text"])]
    assert found, [f["layout"]["title"]["text"] for f in figures(at)]
    return found[0]


@pytest.mark.parametrize("lang,table", [(None, EN), ("zh", ZH_STRINGS)])
def test_attention_toggle_shows_the_pattern_without_position_0(env, lang, table):
    from viz_transformer import load_checkpoint
    at = open_app("viz_explorer/pages/look/attention.py", lang=lang)
    pattern = load_checkpoint(env / "tiny-zh-en").run(ZH).cache["encoder.0.self_attn.hook_pattern"][0, 0].double().numpy()
    base = table["at.heatmap_title"].format(block=table["block.encoder.self_attn"], layer=0,
                                            head=table["at.head_n"].format(h=0))
    caveat = table["at.no_sink_title"].format(title="")
    f = heatmap_of(at, base)
    assert flat(caveat) not in flat(f["layout"]["title"]["text"])
    assert np.allclose(array(f["data"][0]["z"]), pattern, atol=1e-6)          # off: the model's own weights

    by_key(at.toggle, "at_no_sink").set_value(True)
    at.run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    f = heatmap_of(at, table["at.no_sink_title"].format(title=base))
    z = array(f["data"][0]["z"]).astype(float)
    assert np.allclose(z[:, 0], 0)
    want = pattern[:, 1:] / (1 - pattern[:, :1])                               # w / (1 − w_0), by hand
    assert np.allclose(z[:, 1:], want, atol=1e-5)
    assert np.allclose(z.sum(-1), 1, atol=1e-5)
    if lang is None:
        assert "not the model's own weights" in f["layout"]["title"]["text"].replace("<br>", " ")
    else:
        assert "不是模型自己的权重" in flat(f["layout"]["title"]["text"])
    # the model view below still shows the model's weights, the toggle keeps its state on a head change
    by_key(at.selectbox, "at_head").set_value(2)
    at.run(timeout=60)
    assert by_key(at.toggle, "at_no_sink").value is True
    assert flat(caveat) in flat(figures(at)[0]["layout"]["title"]["text"])


def test_head_stats_shows_the_sink_grids(env):
    from viz_transformer import load_checkpoint
    from app_util import page_file
    at = open_app(page_file("head_stats"))
    hm = load_checkpoint(env / "tiny-zh-en")
    run = hm.run(ZH)
    for block in available_blocks(hm.cfg):
        L = n_layers(hm.cfg, block)
        spec = next(f for f in figures(at) if f["layout"].get("title", {}).get("text") and
                    flat(EN["hs.sink_title"].format(block=EN[f"block.{block}"], piece="")).rstrip("()")
                    in flat(f["layout"]["title"]["text"]))
        z = array(spec["data"][0]["z"]).reshape(L, hm.cfg.n_heads)
        for layer in range(L):
            pat = run.cache[hook_name(block, layer, "hook_pattern")][0]
            start = 0 if block != "decoder.self_attn" else 1            # causal query 0 has no choice
            assert np.allclose(z[layer], pat[:, start:, 0].mean(-1).numpy(), atol=1e-5)
    assert sum(EN["hs.sink_strongest"].split("{")[0] in c.value for c in at.caption) == len(available_blocks(hm.cfg))
