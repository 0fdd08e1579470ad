"""Decoding: fast batched greedy translation (training/evaluation) and step-by-step traces.
"""
from __future__ import annotations

import torch

from .model import Transformer
from .tokenizer import Tokenizer


@torch.no_grad()
def greedy_batch(model: Transformer, tok: Tokenizer, texts: list[str], max_new_tokens: int = 64,
                 batch_size: int = 64) -> list[str]:
    """Translate (encoder-decoder) or continue (decoder-only) many texts greedily, with a KV cache."""
    model.eval()
    cfg = model.cfg
    results: list[str] = [""] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        if not cfg.is_encoder_decoder:
            for i in idx:   # prompts differ in length; decode one at a time
                results[i] = continue_text(model, tok, texts[i], max_new_tokens)
            continue
        enc = [tok.encode(texts[i])[: cfg.max_len - 1] + [tok.eos_id] for i in idx]
        S = max(len(e) for e in enc)
        src = torch.full((len(idx), S), cfg.pad_id, dtype=torch.long)
        for r, e in enumerate(enc):
            src[r, : len(e)] = torch.tensor(e)
        cache = model.new_cache(src)
        cur = torch.full((len(idx), 1), cfg.bos_id, dtype=torch.long)
        out = [[] for _ in idx]
        done = torch.zeros(len(idx), dtype=torch.bool)
        for _ in range(min(max_new_tokens, cfg.max_len - 1)):
            logits = model.decode(cur, cache=cache)[:, -1]
            nxt = logits.argmax(-1)
            for r in range(len(idx)):
                if not done[r] and nxt[r].item() != cfg.eos_id:
                    out[r].append(nxt[r].item())
            done |= nxt == cfg.eos_id
            if done.all():
                break
            cur = nxt.unsqueeze(1)
        for r, i in enumerate(idx):
            results[i] = tok.decode(out[r])
    return results


@torch.no_grad()
def continue_text(model: Transformer, tok: Tokenizer, text: str, max_new_tokens: int = 64) -> str:
    cfg = model.cfg
    ids = [tok.bos_id] + tok.encode(text)
    ids = ids[-(cfg.max_len - max_new_tokens):] if len(ids) + max_new_tokens > cfg.max_len else ids
    cache = model.new_cache(prefix_len=len(ids) if cfg.architecture == "prefix_lm" else None)
    cur = torch.tensor([ids])
    out = []
    for _ in range(max_new_tokens):
        nxt = model.decode(cur, cache=cache)[0, -1].argmax().item()
        if nxt == cfg.eos_id:
            break
        out.append(nxt)
        cur = torch.tensor([[nxt]])
    return tok.decode(out)
