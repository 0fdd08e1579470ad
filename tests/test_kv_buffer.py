"""core.kv_buffer.extend against torch.cat, its reference: the same values after many steps, for continuations that
fork from one cache, after a step that wrote and was dropped, and for tensors autograd tracks (never written into);
and a model's cached decode against its full forward, step for step."""
from __future__ import annotations

import torch

from viz_transformer.core import kv_buffer


def _steps(lengths, seed=0, batch=2):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, m, 3, 4, generator=g) for m in lengths]


def test_many_steps_equal_cat_and_write_in_place():
    parts = _steps([5, 1, 1, 3, 1, 1, 1, 1, 1, 7, 1])
    grown, ref = parts[0], parts[0]
    in_place = 0
    for new in parts[1:]:
        before = grown._base
        grown, ref = kv_buffer.extend(grown, new), torch.cat([ref, new], dim=1)
        in_place += grown._base is before
        assert torch.equal(grown, ref)
    assert in_place >= 6                 # most steps land in the room left after the last one


def test_forks_from_one_cache_do_not_see_each_other():
    start, a, b = _steps([4, 1, 1], seed=1)
    past = kv_buffer.extend(start, _steps([1], seed=2)[0])        # a buffer with room
    ref = past.clone()
    left = kv_buffer.extend(past, a)                               # one continuation writes into the room
    right = kv_buffer.extend(past, b)                              # the other must not overwrite it
    assert torch.equal(left, torch.cat([ref, a], dim=1))
    assert torch.equal(right, torch.cat([ref, b], dim=1))
    assert torch.equal(past, ref)


def test_a_dropped_step_leaves_the_kept_cache_as_it_was():
    start, dropped, retried = _steps([6, 2, 2], seed=3)
    past = kv_buffer.extend(start[:, :5], start[:, 5:])
    ref = past.clone()
    kv_buffer.extend(past, dropped)                                # a step that failed after this layer: not kept
    again = kv_buffer.extend(past, retried)
    assert torch.equal(past, ref) and torch.equal(again, torch.cat([ref, retried], dim=1))


def test_tensors_autograd_tracks_are_concatenated_not_written():
    past = torch.randn(1, 3, 2, 4, requires_grad=True)
    new = torch.randn(1, 1, 2, 4, requires_grad=True)
    out = kv_buffer.extend(past, new)
    out.sum().backward()
    assert torch.equal(out, torch.cat([past, new], dim=1))
    assert torch.equal(past.grad, torch.ones_like(past)) and torch.equal(new.grad, torch.ones_like(new))


def test_cached_greedy_decode_equals_the_full_forward_at_every_step():
    from viz_transformer.core.config import ModelConfig
    from viz_transformer.core.model import Transformer
    torch.manual_seed(0)
    for arch in ("decoder_only", "encoder_decoder"):
        cfg = ModelConfig(vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=2 if arch == "encoder_decoder" else 0,
                          n_decoder_layers=2, d_ff=64, max_len=64, dropout=0.0, architecture=arch)
        model = Transformer(cfg).eval()
        src = torch.randint(5, 50, (2, 7)) if arch == "encoder_decoder" else None
        ids = torch.randint(5, 50, (2, 3))
        cache = model.new_cache(src)
        with torch.no_grad():
            step = model.decode(ids, cache=cache)[:, -1]
            for _ in range(20):
                full = model(src, ids)[:, -1] if src is not None else model(ids)[:, -1]
                torch.testing.assert_close(step, full, rtol=1e-5, atol=1e-5)
                nxt = step.argmax(-1, keepdim=True)
                ids = torch.cat([ids, nxt], dim=1)
                step = model.decode(nxt, cache=cache)[:, -1]
