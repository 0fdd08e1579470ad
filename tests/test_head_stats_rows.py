"""The head statistics page's numbers read a block of pattern rows at a time, once per layer for both
tables (head_sums.layer_sums under summaries.head_stats, sinks.sink_shares and summaries.head_tables), equal the
whole-layer computation they replace: pattern_stats on each layer's full [B, H, Q, K] pattern, and the shares'
formula on the full pattern, on a stored run and on a lean run (patterns recomputed per block of rows), for a
translator (cross-attention: two-sided distances) and a language model, with blocks of 3 rows so that every text
spans several.

Tolerance: the per-row quantities are computed in float32, the pattern's own precision, and summed over rows in
float64 (pattern_stats: float64 throughout). Every summed term is ≥ 0 (−p ln p with p ≤ 1, p·|q − k|, p), so the
float32 sums carry no cancellation, only rounding of a few units of 2⁻²⁴ ≈ 6e-8 relative per addition; 1e-5
relative (plus 1e-9 absolute for statistics that are 0) holds that with room, while a wrong key or row, the
smallest slip, moves a statistic by a whole weight."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from viz_transformer.analysis import head_sums, sinks, summaries
from viz_transformer.core.hook_names import BLOCKS, available_blocks, hook_name, n_layers

RTOL, ATOL = 1e-5, 1e-9          # float32 per row, float64 over rows: the module docstring says why
TEXTS = {"tiny_translator": "他是我的朋友。我们明天去北京。", "tiny_lm": "Once upon a time, a cat sat. The end!"}


def whole_layer_stats(run, cfg) -> pd.DataFrame:
    """The old head_stats: pattern_stats on every layer's full pattern."""
    punct = {"decoder": torch.tensor([[summaries.is_punctuation(p) for p in run.tgt_pieces]])}
    if run.src_pieces is not None:
        punct["encoder"] = torch.tensor([[summaries.is_punctuation(p) for p in run.src_pieces]])
    rows = []
    for block in available_blocks(cfg):
        part, attn = BLOCKS[block]
        kpart = "encoder" if attn == "cross_attn" else part
        for layer in range(n_layers(cfg, block)):
            p = run.cache[hook_name(block, layer, "hook_pattern")][:1]
            s = summaries.pattern_stats(p, run.cache[hook_name(block, layer, "hook_mask")][:1],
                                        torch.ones(1, p.shape[2], dtype=torch.bool), punct[kpart],
                                        same_sequence=attn == "self_attn")
            rows += [{"block": block, "layer": layer, "head": h, **{k: float(v[0, h]) for k, v in s.items()}}
                     for h in range(p.shape[1])]
    return pd.DataFrame(rows)


def whole_layer_first_share(run, block: str, layer: int) -> np.ndarray:
    """[H] mean of p[q, 0] over the rows that may see position 0 and another key, on the full pattern."""
    p = run.cache[hook_name(block, layer, "hook_pattern")][0].double()
    allowed = run.cache[hook_name(block, layer, "hook_mask")][0].expand_as(p)
    use = allowed[..., 0] & (allowed.sum(-1) > 1)
    return ((p[..., 0] * use).sum(-1) / use.sum(-1)).numpy()


@pytest.mark.parametrize("model", list(TEXTS))
@pytest.mark.parametrize("lean", [False, True])
def test_row_blocks_equal_the_whole_layer(model, lean, request, monkeypatch):
    hm = request.getfixturevalue(model)
    run = hm.run(TEXTS[model], lean=lean)
    if lean:
        assert getattr(run.cache, "derived", None), "a lean run recomputes its patterns on read"
    want = whole_layer_stats(run, hm.cfg)
    monkeypatch.setattr(head_sums, "ROWS_AT_ONCE", 3)
    got = summaries.head_stats(run)
    assert len(got) == len(want) and (got[["block", "layer", "head"]].values == want[["block", "layer", "head"]].values).all()
    for stat in summaries.STATS:
        assert np.allclose(got[stat], want[stat], rtol=RTOL, atol=ATOL, equal_nan=True), (stat, float((got[stat] - want[stat]).abs().max()))
        assert (got[stat].isna() == want[stat].isna()).all(), stat
    for block in available_blocks(hm.cfg):
        df = sinks.sink_shares(run.cache, block, n_layers(hm.cfg, block), step=3)
        whole = sinks.sink_shares(run.cache, block, n_layers(hm.cfg, block), step=10_000)
        assert df["top_other"].tolist() == whole["top_other"].tolist()
        assert np.allclose(df["top_other_share"], whole["top_other_share"], atol=1e-6, equal_nan=True)
        for layer in range(n_layers(hm.cfg, block)):
            shares = df[df["layer"] == layer]["first_share"].to_numpy()
            assert np.allclose(shares, whole_layer_first_share(run, block, layer), rtol=RTOL, atol=ATOL), (block, layer)
    stats, shares = summaries.head_tables(run)                   # the page's one pass: the same two tables
    pd.testing.assert_frame_equal(stats, got)
    stats3, shares3 = summaries.head_tables(run, workers=3)      # three layers at once: the same numbers, in order
    pd.testing.assert_frame_equal(stats3, stats)
    assert set(shares3) == set(shares) and all(shares3[b].equals(shares[b]) for b in shares)
    assert set(shares) == set(available_blocks(hm.cfg))
    for block, df in shares.items():
        pd.testing.assert_frame_equal(df, sinks.sink_shares(run.cache, block, n_layers(hm.cfg, block), step=3))
        last = n_layers(hm.cfg, block) - 1                        # the attention page asks for its one layer
        one = sinks.sink_shares(run.cache, block, n_layers(hm.cfg, block), layers=[last])
        pd.testing.assert_frame_equal(one, df[df["layer"] == last].reset_index(drop=True))


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_entropy_from_the_scores_equals_minus_p_ln_p(scale):
    """row_entropy from the masked scores (ln Z + Σ p·(M − x), no logarithm per weight) against −Σ p ln p in float64
    on the same float32 weights, and against the logarithm path: random masks with a row that sees one key only
    and a row that sees none (entropy 0), scores spread wide (scale 30: most weights underflow to 0)."""
    from viz_transformer.core.attention import attention_weights
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(4, 9, 16, generator=g) * scale, torch.randn(4, 40, 16, generator=g)
    mask = torch.rand(9, 40, generator=g) > 0.3
    mask[2] = False
    mask[5] = False
    mask[5, 17] = True
    p, scores = attention_weights(q, k, mask, with_scores=True)
    want = -torch.special.xlogy(p.double(), p.double()).sum(-1)
    top = p.amax(-1)
    got = head_sums.row_entropy(p, top, scores)
    assert torch.allclose(got.double(), want, rtol=RTOL, atol=1e-6), float((got.double() - want).abs().max())
    assert torch.equal(got[:, 2], torch.zeros(4)) and torch.equal(got[:, 5], torch.zeros(4))
    assert torch.allclose(head_sums.row_entropy(p.clone(), top).double(), want, rtol=RTOL, atol=1e-6)
    assert want.max() > 0.5, "some rows spread their weight over several keys"
