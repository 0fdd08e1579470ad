"""Greedy decoding that keeps the attention it computes on the way: an encoder-decoder model's encoder patterns (the
encoder runs once per batch) and, at every step, the new query's row of each decoder block, assembled into what a
teacher-forced forward of [begin] + the output would capture, without running that forward.

    for batch, patterns in decode_with_patterns(hm, texts):
        patterns["decoder.0.cross_attn.hook_pattern"]     # [B, H, Q, K] as forward(..., capture=True) keeps it

A query row depends only on the keys before it (causal self-attention; the encoder is read whole), so each row equals
the teacher-forced one to float rounding (tests/test_decode_capture.py). Rows past a sentence's end are zeros; its
decoder length (batch.dec_len) says which rows count.
"""
from __future__ import annotations

from typing import Iterator, Optional, Sequence

import torch

from viz_transformer.core.batch import Batch, forward, make_batch
from viz_transformer.core.encoding import check_decoding, encode_input
from viz_transformer.core.hook_names import decoder_blocks, hook_name
from viz_transformer.run.decoding import default_new_tokens
from viz_transformer.run.generation import generate
from viz_transformer.run.logit_rules import never_generated

HOOKS = ("hook_pattern", "hook_mask")


def _assemble(steps: list[dict[str, torch.Tensor]], name: str) -> torch.Tensor:
    """Step t's row [B, H, K_t] of `name`, stacked as query t of [B, H, T, K] (right-padded with zeros: keys a
    causal row has not seen yet)."""
    rows = [s[name] for s in steps]
    width = max(r.shape[-1] for r in rows)
    out = torch.zeros(*rows[0].shape[:2], len(rows), width, dtype=rows[0].dtype)
    for t, r in enumerate(rows):
        out[:, :, t, : r.shape[-1]] = r
    return out


@torch.no_grad()
def decode_with_patterns(hm, texts: Sequence[str], max_new_tokens: Optional[int] = None,
                         batch_size: int = 64) -> Iterator[tuple[Batch, dict[str, torch.Tensor]]]:
    """(batch, {hook name: tensor}) per batch of texts (sorted by source length, so little padding): the batch
    teacher-forces [begin] + each text's greedy output (as run_padded's), and the dict holds every attention
    block's hook_pattern [B, H, Q, K] and hook_mask, taken while decoding. A batch in which some row's last token
    was never fed back (max_len reached, or a model that forces [end]) is captured by a forward instead."""
    cfg, tok = hm.cfg, hm.tokenizer
    if not cfg.is_encoder_decoder:
        raise ValueError("decode_with_patterns reads an encoder-decoder model (others read their text alone)")
    n_new = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
    check_decoding(cfg, cfg.out_vocab, n_new)
    inputs = [encode_input(tok, cfg, t) for t in texts]
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i].src))
    watch = [hook_name(b, i, h) for b in decoder_blocks(cfg) for i in range(cfg.n_decoder_layers) for h in HOOKS]
    encoder = [hook_name("encoder.self_attn", i, h) for i in range(cfg.n_encoder_layers) for h in HOOKS]
    banned = never_generated(tok)
    # one step past the limit feeds a row stopped by it its last token (the token it then picks is dropped); a
    # model that forces [end] at the limit's last step would pick differently, so it keeps the limit
    extra = 0 if cfg.forced_eos else 1
    for a in range(0, len(order), batch_size):
        chunk = [inputs[i] for i in order[a:a + batch_size]]
        kept: dict[str, torch.Tensor] = {}
        steps: list[dict[str, torch.Tensor]] = []

        def keep(x, hook):
            kept[hook.name] = x.detach().to("cpu", copy=True)

        def on_step(t, logits, ids, rows):
            steps.append(dict(rows))
            return False
        outs = generate(hm.model, make_batch(cfg, chunk), n_new + extra, banned, on_step=on_step, watch=watch,
                        fwd_hooks=[(n, keep) for n in encoder], drop_finished=True)
        outs = [o[:n_new] for o in outs]
        batch = make_batch(cfg, chunk, outs)
        if len(steps) < batch.dec.shape[1]:          # a row's last token was never fed back: read the whole batch
            _, cache = forward(hm.model, batch, capture=True, names_filter=lambda n: n.endswith(HOOKS),
                               logits_at=torch.zeros(batch.dec.shape, dtype=torch.bool))
            yield batch, {n: cache[n] for n in encoder + watch}
            continue
        found = {n: _assemble(steps, n) for n in watch}
        for n in watch:                                   # masks came back as float rows (last_rows): bool again
            if n.endswith("hook_mask"):
                found[n] = found[n] > 0.5
        yield batch, {**kept, **found}
