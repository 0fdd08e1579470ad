"""The capture contract: every promised hook name and shape, hooks only inside the context
(also after an exception), one-call interventions, detached copies, and thread safety."""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

from viz_transformer import load_checkpoint
from viz_transformer.core.hooks import Cache, active_hook_names, hooks_active

ATTN = ["hook_q", "hook_k", "hook_v", "hook_scores", "hook_mask", "hook_pattern", "hook_z", "hook_out"]


def promised_names(architecture: str, n_enc: int, n_dec: int) -> list[str]:
    """The capture names the spec lists, written out by hand."""
    enc_dec = architecture == "encoder_decoder"
    names = []
    for e in (["src_embed", "tgt_embed"] if enc_dec else ["embed"]):
        names += [f"{e}.hook_tok", f"{e}.hook_pos"]
    for i in range(n_enc):
        names += [f"encoder.{i}.self_attn.{h}" for h in ATTN]
        names += [f"encoder.{i}.hook_resid_{s}" for s in ("pre", "mid", "post")] + [f"encoder.{i}.ff.hook_post"]
    for i in range(n_dec):
        names += [f"decoder.{i}.self_attn.{h}" for h in ATTN]
        if enc_dec:
            names += [f"decoder.{i}.cross_attn.{h}" for h in ATTN]
            names.append(f"decoder.{i}.hook_resid_cross")
        names += [f"decoder.{i}.hook_resid_{s}" for s in ("pre", "mid", "post")] + [f"decoder.{i}.ff.hook_post"]
    return names


@pytest.fixture(scope="module")
def models(ckpt_root, tiny_translator, tiny_lm):
    return {"encoder_decoder": tiny_translator, "decoder_only": tiny_lm,
            "prefix_lm": load_checkpoint(ckpt_root / "tiny-prefix")}


def inputs(hm, B=2, S=5, T=4):
    g = torch.Generator().manual_seed(0)
    V = hm.cfg.vocab_size
    if hm.cfg.is_encoder_decoder:
        return (torch.randint(4, V, (B, S), generator=g), torch.randint(4, V, (B, T), generator=g)), {}
    kw = {"prefix_len": 2} if hm.cfg.architecture == "prefix_lm" else {}
    return (torch.randint(4, V, (B, T), generator=g),), kw


def run_threads(targets, timeout: float) -> None:
    """Start one thread per target, then wait for all of them."""
    threads = [threading.Thread(target=fn) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_every_promised_name_exists_with_its_shape(models, architecture):
    hm = models[architecture]
    cfg = hm.cfg
    promised = promised_names(architecture, cfg.n_encoder_layers, cfg.n_decoder_layers)
    assert set(promised) <= set(hm.model.hook_names)
    if architecture != "encoder_decoder":      # no encoder, no cross-attention, one embed
        assert not any(n.startswith(("encoder.", "src_embed.")) or ".cross_attn." in n for n in hm.model.hook_names)
    B, S, T = 2, 5, 4
    args, kw = inputs(hm, B, S, T)
    _, cache = hm.model.run_with_cache(*args, **kw)
    assert set(promised) <= set(cache)
    d, H, dh = cfg.d_model, cfg.n_heads, cfg.d_head
    for name in promised:
        t = cache[name]
        part, hook = name.split(".")[0], name.rsplit(".", 1)[1]
        q = S if part in ("src_embed", "encoder") else T                     # query / position length
        k = S if part == "encoder" or ".cross_attn." in name else q          # key length
        want = {"hook_tok": (B, q, d), "hook_pos": (q, d),
                "hook_q": (B, q, H, dh), "hook_k": (B, k, H, dh), "hook_v": (B, k, H, dh),
                "hook_scores": (B, H, q, k), "hook_mask": (B, 1, q, k), "hook_pattern": (B, H, q, k),
                "hook_z": (B, q, H, dh), "hook_out": (B, q, d), "hook_post": (B, q, cfg.d_ff)}.get(hook, (B, q, d))
        assert tuple(t.shape) == want, name
        assert t.dtype == (torch.bool if hook == "hook_mask" else torch.float32), name


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_ff_hook_post_is_the_activation_of_the_feed_forward_input(models, architecture):
    """ff.hook_post = act(W_in(input of the feed-forward)), recomputed from the captured residual:
    pre-norm feeds LN(x), post-norm feeds x itself (x = resid_mid, or resid_cross with cross-attention)."""
    hm = models[architecture]
    args, kw = inputs(hm)
    _, cache = hm.model.run_with_cache(*args, **kw)
    parts = [("encoder", hm.model.encoder)] if hm.cfg.is_encoder_decoder else []
    for part, blocks in parts + [("decoder", hm.model.decoder)]:
        for i, block in enumerate(blocks):
            before = "hook_resid_cross" if part == "decoder" and hm.cfg.is_encoder_decoder else "hook_resid_mid"
            x = cache[f"{part}.{i}.{before}"]
            h = block.ln2(x) if hm.cfg.norm == "pre" else x
            act = torch.nn.functional.relu if hm.cfg.activation == "relu" else torch.nn.functional.gelu
            with torch.no_grad():
                ref = act(h @ block.ff.W_in.weight.T + block.ff.W_in.bias)
            torch.testing.assert_close(cache[f"{part}.{i}.ff.hook_post"], ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_notebook_entry_point_returns_every_name(models, architecture):
    hm = models[architecture]
    target = "I am a student." if architecture == "encoder_decoder" else None
    logits, cache = hm.run_with_cache("我是学生。", target=target)
    assert set(promised_names(architecture, hm.cfg.n_encoder_layers, hm.cfg.n_decoder_layers)) <= set(cache)
    assert logits.shape[-1] == hm.cfg.vocab_size


def test_cache_stack_and_names_filter(tiny_translator):
    model = tiny_translator.model
    (src, tgt), _ = inputs(tiny_translator)
    _, cache = model.run_with_cache(src, tgt)
    st = cache.stack("self_attn.hook_pattern", part="encoder", batch=1)
    n = model.cfg.n_encoder_layers
    assert st.shape == (n, model.cfg.n_heads, src.shape[1], src.shape[1])
    for i in range(n):
        assert torch.equal(st[i], cache[f"encoder.{i}.self_attn.hook_pattern"][1])
    assert cache.stack("cross_attn.hook_pattern").shape[0] == model.cfg.n_decoder_layers
    with pytest.raises(KeyError, match="was not captured"):
        cache["decoder.0.self_attn.hook_patern"]
    _, only = model.run_with_cache(src, tgt, names_filter="decoder.1.cross_attn.hook_pattern")
    assert list(only) == ["decoder.1.cross_attn.hook_pattern"]
    _, some = model.run_with_cache(src, tgt, names_filter=["encoder.0.hook_resid_pre", "tgt_embed.hook_tok"])
    assert set(some) == {"encoder.0.hook_resid_pre", "tgt_embed.hook_tok"}
    _, pred = model.run_with_cache(src, tgt, names_filter=lambda n: n.endswith("hook_z"))
    assert len(pred) == 2 * model.cfg.n_decoder_layers + model.cfg.n_encoder_layers
    with pytest.raises(ValueError, match="did you mean"):
        model.run_with_cache(src, tgt, names_filter="decoder.0.self_attn.hook_patern")


@pytest.mark.parametrize("which", ["translator", "lm"])
def test_a_capture_may_project_only_some_rows(tiny_translator, tiny_lm, which):
    """core.batch.forward(capture=True, logits_at=...): every capture as in the plain capture (each hook point comes
    before the rows are chosen), the logits those rows of the full ones; no row chosen: no logits, the same captures."""
    from viz_transformer.core.batch import forward, one_row
    hm = tiny_translator if which == "translator" else tiny_lm
    batch = one_row([5, 6, 7, 8], [2, 9, 10, 11]) if which == "translator" else one_row(None, [2, 9, 10, 11, 12])
    full, cache = forward(hm.model, batch, capture=True)
    for rows in ([False, True, False, True, False][: batch.dec.shape[1]], [False] * batch.dec.shape[1]):
        at = torch.tensor([rows])
        some, got = forward(hm.model, batch, capture=True, logits_at=at)
        torch.testing.assert_close(some, full[at])
        assert some.shape == (sum(rows), full.shape[-1]) and set(got) == set(cache)
        for name in cache:
            assert torch.equal(got[name], cache[name]), name


def test_decoder_only_model_has_no_encoder_part(tiny_lm):
    (ids,), _ = inputs(tiny_lm)
    _, cache = tiny_lm.model.run_with_cache(ids)
    with pytest.raises(KeyError):
        cache.stack("self_attn.hook_pattern", part="encoder")


# -- hooks only inside the context ------------------------------------------------------------
def test_hooks_are_gone_after_an_exception(tiny_translator):
    model = tiny_translator.model
    (src, tgt), _ = inputs(tiny_translator)
    calls = []

    def count(x, hook):
        calls.append(hook.name)

    def boom(x, hook):
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        with hooks_active([(n, count) for n in model.hook_names] + [("decoder.0.cross_attn.hook_pattern", boom)]):
            assert "decoder.0.cross_attn.hook_pattern" in active_hook_names()
            model(src, tgt)
    assert "encoder.0.hook_resid_pre" in calls and len(calls) < 2 * len(model.hook_names)
    assert active_hook_names() == []
    n = len(calls)
    model(src, tgt)
    assert len(calls) == n                                          # a plain call runs no hook
    with pytest.raises(RuntimeError):
        model.run_with_hooks(src, tgt, fwd_hooks=[("decoder.1.hook_resid_mid", boom)])
    with pytest.raises(RuntimeError):
        with hooks_active([("encoder.0.hook_resid_post", boom)]):
            model.run_with_cache(src, tgt)
    assert active_hook_names() == []
    model(src, tgt)
    assert len(calls) == n


def test_nested_contexts_restore_the_outer_hooks(tiny_lm):
    (ids,), _ = inputs(tiny_lm)
    with hooks_active([("embed.hook_tok", lambda x, h: None)]):
        with pytest.raises(ZeroDivisionError):
            with hooks_active([("decoder.0.hook_resid_pre", lambda x, h: 1 / 0)]):
                tiny_lm.model(ids)
        assert active_hook_names() == ["embed.hook_tok"]
    assert active_hook_names() == []


def test_head_ablation_for_one_call(tiny_translator):
    model = tiny_translator.model
    (src, tgt), _ = inputs(tiny_translator)
    name, head = "decoder.0.self_attn.hook_z", 1

    def ablate(z, hook):
        z = z.clone()
        z[:, :, head] = 0.0                                         # (B, q, head, d_head)
        return z
    base, base_cache = model.run_with_cache(src, tgt)
    with torch.no_grad():
        ablated = model.run_with_hooks(src, tgt, fwd_hooks=[(name, ablate)])
        with hooks_active([(name, ablate)]):
            _, ab_cache = model.run_with_cache(src, tgt)
        after = model(src, tgt)
    assert not torch.allclose(ablated, base, atol=1e-4)
    assert torch.equal(after, base)
    # the ablated head's output is W_O applied to z with that head zeroed (computed by hand)
    z = base_cache[name].clone()
    z[:, :, head] = 0.0
    W_O = model.decoder[0].self_attn.W_O
    want = F.linear(z.reshape(*z.shape[:2], -1), W_O.weight, W_O.bias)
    torch.testing.assert_close(ab_cache["decoder.0.self_attn.hook_out"], want, atol=1e-6, rtol=1e-5)
    assert (ab_cache[name][:, :, head] == 0).all()


def test_a_hook_may_not_change_the_shape(tiny_lm):
    (ids,), _ = inputs(tiny_lm)
    with pytest.raises(ValueError, match="shape"):
        tiny_lm.model.run_with_hooks(ids, fwd_hooks=[("decoder.0.hook_resid_pre", lambda x, h: x[:, :1])])


def test_captured_tensors_are_detached_cpu_copies(tiny_lm):
    """tiny_lm has learned positions: embed.hook_pos is a slice of a parameter in the forward."""
    model = tiny_lm.model
    (ids,), _ = inputs(tiny_lm)
    pos_before = model.embed.pos.weight.detach().clone()
    logits, cache = model.run_with_cache(ids)
    for name, t in cache.items():
        assert t.device.type == "cpu" and not t.requires_grad, name
    for name in ("embed.hook_pos", "embed.hook_tok", "decoder.0.hook_resid_pre", "decoder.0.self_attn.hook_k"):
        cache[name].add_(100.0)
    assert torch.equal(model.embed.pos.weight.detach(), pos_before)
    again, cache2 = model.run_with_cache(ids)
    assert torch.equal(again, logits)
    assert not torch.equal(cache2["embed.hook_pos"], cache["embed.hook_pos"])
    store = Cache()
    x = torch.randn(3, requires_grad=True)
    store.store("x", x * 2)
    assert not store["x"].requires_grad



@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only"])
def test_no_captured_tensor_shares_memory_with_another_or_the_model(models, architecture):
    """Fresh tensors are kept without a copy: still, no two entries and no entry and a weight share storage."""
    hm = models[architecture]
    ids, kw = inputs(hm)
    _, cache = hm.model.run_with_cache(*ids, **kw)
    model_ptrs = {t.untyped_storage().data_ptr() for t in [*hm.model.parameters(), *hm.model.buffers()]}
    seen: dict[int, str] = {}
    for name, t in cache.items():
        ptr = t.untyped_storage().data_ptr()
        assert ptr not in model_ptrs, name
        assert ptr not in seen, f"{name} shares memory with {seen.get(ptr)}"
        seen[ptr] = name


def test_an_in_place_edit_downstream_leaves_earlier_captures_alone(tiny_translator):
    """A hook that zeroes encoder.1's resid_pre in place (returning None) edits the very tensor that
    encoder.0 returned; the capture of encoder.0.hook_resid_post must still hold what encoder.0 computed,
    i.e. what a run without the hook captures there (the reference: independent of the edit)."""
    model = tiny_translator.model
    (src, tgt), _ = inputs(tiny_translator)
    _, ref = model.run_with_cache(src, tgt, names_filter="encoder.0.hook_resid_post")

    def zero(x, hook):
        x.zero_()
    with hooks_active([("encoder.1.hook_resid_pre", zero)]):
        _, cache = model.run_with_cache(src, tgt)
    assert torch.equal(cache["encoder.0.hook_resid_post"], ref["encoder.0.hook_resid_post"])
    assert not torch.equal(cache["encoder.0.hook_resid_post"], torch.zeros_like(ref["encoder.0.hook_resid_post"]))
    assert torch.equal(cache["encoder.1.hook_resid_pre"], torch.zeros_like(cache["encoder.1.hook_resid_pre"]))

# -- threads ----------------------------------------------------------------------------------
JOBS = [("我是学生。", "I am a student."), ("今天天气很好。你叫什么名字？", "The weather is nice today.")]


def same_cache(a, b) -> None:
    assert set(a) == set(b)
    for name in a:
        assert a[name].shape == b[name].shape, name
        torch.testing.assert_close(a[name], b[name], atol=1e-6, rtol=1e-6, msg=name)


def test_two_threads_get_their_own_caches(tiny_translator):
    hm = tiny_translator
    singles = [hm.run_with_cache(*job) for job in JOBS]
    assert singles[0][0].shape != singles[1][0].shape
    results: dict[int, list] = {0: [], 1: []}
    errors: list = []
    barrier = threading.Barrier(2)

    def work(k):
        try:
            barrier.wait(timeout=30)
            for _ in range(12):
                results[k].append(hm.run_with_cache(*JOBS[k]))
        except Exception as e:     # noqa: BLE001  (reported below, in the main thread)
            errors.append(e)
    run_threads([lambda: work(0), lambda: work(1)], timeout=120)
    assert not errors
    for k in (0, 1):
        assert len(results[k]) == 12
        for logits, cache in results[k]:
            torch.testing.assert_close(logits, singles[k][0], atol=1e-6, rtol=1e-6)
            same_cache(cache, singles[k][1])


def test_a_run_paused_mid_forward_does_not_see_another_threads_run(tiny_translator):
    """Thread A stops inside its forward pass while thread B runs a whole capture."""
    hm = tiny_translator
    singles = [hm.run_with_cache(*job) for job in JOBS]
    a_paused, b_done = threading.Event(), threading.Event()
    out, errors = {}, []

    def pause(x, hook):
        a_paused.set()
        assert b_done.wait(timeout=30), "thread B never finished"

    def thread_a():
        try:
            with hooks_active([("decoder.0.hook_resid_mid", pause)]):
                out[0] = hm.run_with_cache(*JOBS[0])
        except Exception as e:     # noqa: BLE001
            errors.append(e)

    def thread_b():
        try:
            assert a_paused.wait(timeout=30)
            assert active_hook_names() == []         # A's hooks are not visible here
            out[1] = hm.run_with_cache(*JOBS[1])
        except Exception as e:     # noqa: BLE001
            errors.append(e)
        finally:
            b_done.set()
    run_threads([thread_a, thread_b], timeout=60)
    assert not errors
    for k in (0, 1):
        torch.testing.assert_close(out[k][0], singles[k][0], atol=1e-6, rtol=1e-6)
        same_cache(out[k][1], singles[k][1])
