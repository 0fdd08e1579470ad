"""The sinusoidal table against its formula, and the embedding that adds it."""
from __future__ import annotations

import math

import pytest
import torch

from core_util import rand_ids, tiny_model
from viz_transformer.core.positional import PositionalEncoding, sinusoidal_table


def formula(max_len: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), by loops."""
    pe = [[0.0] * d for _ in range(max_len)]
    for pos in range(max_len):
        for i in range(0, d, 2):
            angle = pos / (10000 ** (i / d))
            pe[pos][i] = math.sin(angle)
            if i + 1 < d:
                pe[pos][i + 1] = math.cos(angle)
    return torch.tensor(pe, dtype=torch.float64)


@pytest.mark.parametrize("max_len,d", [(64, 16), (50, 32), (10, 7)])
def test_sinusoidal_table_equals_the_formula(max_len, d):
    table = sinusoidal_table(max_len, d)
    assert table.shape == (max_len, d)
    assert (table.double() - formula(max_len, d)).abs().max() < 1e-6


def test_dot_product_of_rows_depends_only_on_distance():
    d = 32
    pe = sinusoidal_table(100, d).double()
    freqs = [1 / 10000 ** (i / d) for i in range(0, d, 2)]
    for k in (0, 1, 3, 10, 25):
        dots = torch.stack([pe[p] @ pe[p + k] for p in range(0, 70, 7)])
        expected = sum(math.cos(k * w) for w in freqs)         # sin a sin b + cos a cos b = cos(a - b)
        assert (dots - expected).abs().max() < 1e-5, k
    assert not math.isclose(float(pe[0] @ pe[1]), float(pe[0] @ pe[10]))


def test_positional_encoding_offsets_and_limit():
    pe = PositionalEncoding("sinusoidal", 20, 8)
    ref = formula(20, 8).float()
    torch.testing.assert_close(pe(5), ref[:5], atol=1e-6, rtol=0)
    torch.testing.assert_close(pe(3, offset=7), ref[7:10], atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="max_len"):
        pe(5, offset=16)
    learned = PositionalEncoding("learned", 20, 8)
    assert isinstance(learned.weight, torch.nn.Parameter)
    assert torch.equal(learned(2, offset=3), learned.weight[3:5])


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_embedding_is_scaled_tokens_plus_positions(positional):
    model = tiny_model("decoder_only", positional=positional)
    d = model.cfg.d_model
    ids = rand_ids(2, 6)
    _, cache = model.run_with_cache(ids, names_filter=lambda n: n.startswith("embed."))
    table = formula(32, d).float() if positional == "sinusoidal" else model.embed.pos.weight.detach()
    torch.testing.assert_close(cache["embed.hook_pos"], table[:6], atol=1e-6, rtol=0)
    W_E = model.embed.W_E.weight.detach()
    torch.testing.assert_close(cache["embed.hook_tok"], W_E[ids] * math.sqrt(d))
    # the first block's residual stream starts at tokens + positions
    _, cache = model.run_with_cache(ids, names_filter="decoder.0.hook_resid_pre")
    torch.testing.assert_close(cache["decoder.0.hook_resid_pre"], W_E[ids] * math.sqrt(d) + table[:6],
                               atol=1e-5, rtol=1e-5)
