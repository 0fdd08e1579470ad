"""Why a head attends here: one attention score split into the parts of the residual stream that make it.

With every norm's scale frozen at the value the run computed (TransformerLens's convention), the stream a head
reads is a sum of parts: the token embedding, the position (sinusoidal or learned; RoPE acts inside q and k instead),
the segment (BERT), each earlier attention head's output, each earlier MLP's output, and the biases and norm offsets
together ("bias"). q and k are then sums over parts, and the score q·k / divisor a sum over (query part, key part)
terms, plus what is added to it (T5's relative position bias, `extra`); the mask acts after the sum. The terms add up
to the score the model computed.

    run = hm.run("我是一名工程师。")
    t = score_terms(hm, run, "decoder.cross_attn", layer=1, head=6, query=4, key=5)
    t.query_parts, t.key_parts, t.matrix        # names, names, [query parts × key parts]
    t.total() == t.score                        # within float rounding

Part names: `token`, `position`, `segment`, `L{l}.H{h}` (an attention head), `L{l}.X{h}` (a cross-attention head),
`L{l}.mlp`, `bias`; in an encoder-decoder each but `bias` is prefixed with its stack (`enc.token`, `dec.L0.H3`).
The run must hold the captures every part is read from (a full `hm.run(text)`, not a lean or filtered one). Models
with a norm on q and k (Qwen3's qk_norm) are not split (ValueError): that norm is applied per head after the parts
meet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from viz_transformer.core.rope import cos_sin, rotate

Parts = dict[str, torch.Tensor]          # part name -> [positions, d_model], float64
Rows = Optional[list[int]]               # the positions a split reads (None: all of them)


@dataclass
class Terms:
    query_parts: list[str]
    key_parts: list[str]
    matrix: torch.Tensor                 # [query parts, key parts] float64: q_a · k_b / divisor
    extra: dict                          # name -> float: added to the scaled score (T5's relative position bias)
    score: float                         # the score the model computed (hook_scores, before the mask)

    def total(self) -> float:
        return float(self.matrix.sum()) + sum(self.extra.values())

    def by_query_part(self) -> dict[str, float]:
        return dict(zip(self.query_parts, self.matrix.sum(1).tolist()))

    def by_key_part(self) -> dict[str, float]:
        return dict(zip(self.key_parts, self.matrix.sum(0).tolist()))

    def key_groups(self, by_layer: bool = False) -> dict[str, float]:
        """by_key_part summed by where each part comes from: "word" (the token embedding), "position", "context" (what
        earlier heads, MLPs and the segment wrote there; by_layer: "layer l" for each layer's heads and MLP, and
        "segment"), "bias"."""
        out: dict[str, float] = {}
        for part, v in self.by_key_part().items():
            out[part_group(part, by_layer)] = out.get(part_group(part, by_layer), 0.0) + v
        return out


def part_group(part: str, by_layer: bool = False) -> str:
    """A part's group (Terms.key_groups): word, position, bias, or context (by_layer: layer l, segment)."""
    name = part.split(".", 1)[1] if part.startswith(("enc.", "dec.")) else part
    if name in ("token", "position", "bias"):
        return {"token": "word"}.get(name, name)
    if by_layer and name.startswith("L"):
        return f"layer {name[1:].split('.', 1)[0]}"
    return name if by_layer else "context"


def full_run(hm, text: str):
    """A run of `text` with every capture the split reads: hm's own full run, even where hm.run is a caller's
    cached lean one (the app's lesson model), through a HookedModel that shares hm's weights."""
    from viz_transformer.run.capture import HookedModel
    return HookedModel(hm.model, hm.tokenizer, getattr(hm, "path", None), getattr(hm, "meta", None)).run(text)


TERM_CAPTURES = ("hook_tok", "hook_pos", "hook_type", "hook_z", "hook_post", "hook_bias", "hook_scores",
                 "hook_pattern", "hook_q", "hook_k", "hook_v", "hook_mask", "hook_rot_q", "hook_rot_k")


def term_captures(name: str) -> bool:
    """names_filter for term_run: the embeddings' parts, each head's z, each MLP's activations, T5's bias, and the
    scores with what they are recomputed from; not the residual captures, most of a full run."""
    return name.rsplit(".", 1)[-1] in TERM_CAPTURES


def term_run(hm, text: str, output_ids=None):
    """The smallest run score_terms and logit_terms read: term_captures only, its scores and patterns recomputed on
    read (hm.run(lean=True)), so a long text never holds every layer's [head, q, k] at once. output_ids: the output of
    a run of the same text already made (its `output_ids`), teacher-forced instead of generated again (a large LM's
    continuation is most of a run's time)."""
    from viz_transformer.run.capture import HookedModel
    own = HookedModel(hm.model, hm.tokenizer, getattr(hm, "path", None), getattr(hm, "meta", None))
    given = None if output_ids is None or hm.cfg.is_encoder_only else list(output_ids)
    return own.run(text, names_filter=term_captures, lean=True, output_ids=given)


def _get(run, name: str, rows: Rows = None) -> torch.Tensor:
    """A capture without its batch axis (hook_pos has none), only `rows` of its positions (None: all), float64."""
    if name not in run.cache:
        raise ValueError(f"this run has no {name}: score_terms needs a full capture (hm.run(text) or term_run)")
    t = run.cache[name]
    t = t if name.endswith("hook_pos") else t[0]
    return (t if rows is None else t[rows]).double()


def frozen_norm(norm: nn.Module, parts: Parts) -> Parts:
    """A norm applied to each part with its scale frozen at the one the parts' sum gets: LayerNorm centres each part
    and divides by the sum's standard deviation, then the gain; its bias joins `bias`. RMSNorm divides by the sum's
    root mean square, then the gain. Identity (a post-norm stack's missing final norm) leaves the parts."""
    if isinstance(norm, nn.Identity):
        return dict(parts)
    x = sum(parts.values())
    w = norm.weight.detach().double()
    if isinstance(norm, nn.LayerNorm):
        eps = norm.eps
        scale = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
        out = {k: (v - v.mean(-1, keepdim=True)) / scale * w for k, v in parts.items()}
        if norm.bias is not None:
            out["bias"] = out.get("bias", 0) + norm.bias.detach().double()
        return out
    if isinstance(norm, nn.RMSNorm):
        eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
        scale = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
        return {k: v / scale * w for k, v in parts.items()}
    raise ValueError(f"score_terms does not split a {type(norm).__name__}")


def _embed_parts(embed, run, name: str, prefix: str, rows: Rows) -> Parts:
    tok = _get(run, f"{name}.hook_tok", rows)                              # [rows, d_model]
    parts = {f"{prefix}token": tok, "bias": torch.zeros_like(tok)}
    if f"{name}.hook_pos" in run.cache:
        parts[f"{prefix}position"] = _get(run, f"{name}.hook_pos", rows)
    if f"{name}.hook_type" in run.cache:
        parts[f"{prefix}segment"] = _get(run, f"{name}.hook_type", rows)
    if hasattr(embed, "norm"):
        parts = frozen_norm(embed.norm, parts)
    return parts


def _add(parts: Parts, new: Parts) -> Parts:
    out = dict(parts)
    for k, v in new.items():
        out[k] = out[k] + v if k in out else v
    return out


def _times(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """x @ W.T in the weight's precision (float32 at least), as float64: a 0.5B model's weights are never copied to
    float64 for a cell (their float64 copies would take most of a split's time; the error is float32's)."""
    W = W.detach()
    W = W if W.dtype in (torch.float32, torch.float64) else W.float()
    return (x.to(W.dtype) @ W.T).double()


def _heads(attn, run, hook: str, prefix: str, tag: str, layer: int, rows: Rows) -> Parts:
    """Each head's share of an attention block's output (z_h · W_O's slice), W_O's bias as `bias`."""
    z = _get(run, hook, rows)                                             # [T, head, d_head]
    W = attn.W_O.weight                                                   # [d_model, heads · d_head]
    d = attn.d_head
    out = {f"{prefix}L{layer}.{tag}{h}": _times(z[:, h], W[:, h * d:(h + 1) * d]) for h in range(attn.n_heads)}
    if attn.W_O.bias is not None:
        out["bias"] = attn.W_O.bias.detach().double().expand(z.shape[0], -1)
    return out


def _mlp(ff, run, hook: str, name: str, rows: Rows) -> Parts:
    post = _get(run, hook, rows)                                               # [T, d_ff]
    out = {name: _times(post, ff.W_out.weight)}
    if ff.W_out.bias is not None:
        out["bias"] = ff.W_out.bias.detach().double().expand(post.shape[0], -1)
    return out


def _sublayer(block, parts: Parts, ln, added: Parts) -> Parts:
    """A residual sublayer on the parts: pre-norm x + f(LN(x)) adds f's parts; post-norm LN(x + f(x)) adds them,
    then the norm with its scale frozen."""
    return _add(parts, added) if block.pre else frozen_norm(ln, _add(parts, added))


def stream_parts(hm, run, stack: str, layer: int, site: str, rows: Rows = None) -> Parts:
    """The parts of the residual stream of `stack` ("encoder" or "decoder") where block `layer` reads for `site`
    ("self_attn", "cross_attn", or "out": after the stack's last layer and its final norm), at the positions `rows`
    (None: every position). Every step acts on each position alone, so a cell needs only its query's and key's rows:
    what keeps one cell's terms cheap on a long text."""
    model, cfg = hm.model, hm.cfg
    two = cfg.is_encoder_decoder
    prefix = {"encoder": "enc.", "decoder": "dec."}[stack] if two else ""
    embed = {"encoder": model.enc_embed, "decoder": model.dec_embed}[stack]
    embed_name = ("src_embed" if stack == "encoder" else "tgt_embed") if two else "embed"
    parts = _embed_parts(embed, run, embed_name, prefix, rows)
    blocks = model.encoder if stack == "encoder" else model.decoder
    for i, block in enumerate(blocks):
        if i == layer and site == "self_attn":
            return parts
        parts = _sublayer(block, parts, block.ln1, _heads(block.self_attn, run, f"{stack}.{i}.self_attn.hook_z",
                                                          prefix, "H", i, rows))
        if getattr(block, "has_cross", False):
            if i == layer and site == "cross_attn":
                return parts
            parts = _sublayer(block, parts, block.ln_cross, _heads(block.cross_attn, run,
                                                                   f"{stack}.{i}.cross_attn.hook_z", prefix, "X", i, rows))
        parts = _sublayer(block, parts, block.ln2, _mlp(block.ff, run, f"{stack}.{i}.ff.hook_post", f"{prefix}L{i}.mlp",
                                                                 rows))
    if site != "out":
        raise ValueError(f"{stack} has no layer {layer} with {site}")
    final = model.encoder_norm if stack == "encoder" else getattr(model, "decoder_norm", nn.Identity())
    return frozen_norm(final, parts)


def _project(linear: nn.Linear, parts: Parts, pos: int, head: int, d: int) -> dict[str, torch.Tensor]:
    """Each part's slice of a q/k projection for one head at one position; the projection's bias joins `bias`."""
    W = linear.weight.detach().double()[head * d:(head + 1) * d]            # [d_head, d_model]
    out = {k: v[pos] @ W.T for k, v in parts.items()}
    if linear.bias is not None:
        out["bias"] = out.get("bias", 0) + linear.bias.detach().double()[head * d:(head + 1) * d]
    return out


def score_terms(hm, run, block: str, layer: int, head: int, query: int, key: int) -> Terms:
    """Score (query, key) of head `head` in `block` ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
    at `layer`, split into query part × key part terms (module docstring). ValueError for a block, layer, head or
    position the run does not have, or a model the split does not cover."""
    cfg, model = hm.cfg, hm.model
    if cfg.qk_norm:
        raise ValueError("a model with a norm on q and k (qk_norm) cannot be split into parts: the norm acts per head "
                         "after the parts meet")
    stack, site = block.split(".")
    name = f"{stack}.{layer}.{site}"
    scores = _get(run, f"{name}.hook_scores")                              # [head, T, S]
    if not (0 <= head < scores.shape[0] and 0 <= query < scores.shape[1] and 0 <= key < scores.shape[2]):
        raise ValueError(f"{block} layer {layer} has {scores.shape[0]} heads, {scores.shape[1]} queries and "
                         f"{scores.shape[2]} keys: no ({head}, {query}, {key})")
    blk = (model.encoder if stack == "encoder" else model.decoder)[layer]
    attn = getattr(blk, site)
    rows = [query] if site == "cross_attn" or key == query else [query, key]     # the stream at these positions only
    q_in = stream_parts(hm, run, stack, layer, site, rows)
    if blk.pre:
        q_in = frozen_norm(blk.ln_cross if site == "cross_attn" else blk.ln1, q_in)
    if site == "cross_attn":                                               # keys: the encoder's output
        k_in, k_row = stream_parts(hm, run, "encoder", cfg.n_encoder_layers, "out", [key]), 0
    else:
        k_in, k_row = q_in, rows.index(key)
    d, rep = attn.d_head, attn.n_heads // attn.n_kv_heads
    q = _project(attn.W_Q, q_in, 0, head, d)
    k = _project(attn.W_K, k_in, k_row, head // rep, d)
    if attn.rope is not None:                                              # the rotation is linear: each part's own
        cq, sq = (c[query:query + 1].double() for c in cos_sin(attn.rope, 0, query + 1))
        ck, sk = (c[key:key + 1].double() for c in cos_sin(attn.rope, 0, key + 1))
        q = {n: rotate(v[None, None, None], cq, sq)[0, 0, 0] for n, v in q.items()}
        k = {n: rotate(v[None, None, None], ck, sk)[0, 0, 0] for n, v in k.items()}
    divisor = attn.divisor if attn.divisor is not None else d ** 0.5
    qn, kn = ([n for n in d if n != "bias"] + ["bias"] for d in (q, k))      # embeddings, layers in order, bias last
    Q, K = torch.stack([q[n] for n in qn]), torch.stack([k[n] for n in kn])
    extra = {}
    bias_name = f"{stack}.0.self_attn.hook_bias"            # T5: layer 0's bias, added by every self-attention layer
    if site == "self_attn" and cfg.positional == "relative":
        extra["relative position"] = float(_get(run, bias_name)[head, query, key])
    return Terms(qn, kn, (Q @ K.T) / float(divisor), extra, float(scores[head, query, key]))


@dataclass
class LogitTerms:
    parts: list[str]
    values: torch.Tensor                 # [parts] float64: each part's direct contribution to the logit
    logit: float                         # the logit the model computed
    token: int
    row: int                             # the decoder row that predicts it

    def total(self) -> float:
        return float(self.values.sum())

    def by_part(self) -> dict[str, float]:
        return dict(zip(self.parts, self.values.tolist()))


def logit_terms(hm, run, step: int, token=None) -> LogitTerms:
    """The logit of the token written at output step `step` (1 = the first; `token`: another id or piece instead,
    to ask "why this and not that") split into each part's direct contribution: the decoder's last stream
    (stream_parts, final norm frozen) through the unembedding; the output layer's biases join `bias`. Their sum is the
    model's logit. ValueError for an encoder-only model (its masked-LM head is not linear) or a step the run lacks."""
    cfg, model = hm.cfg, hm.model
    if cfg.is_encoder_only:
        raise ValueError("an encoder-only model writes no output step, and its masked-LM head is not linear")
    n_out = len(run.output_ids or ())
    if not 1 <= step <= n_out:
        raise ValueError(f"step must be between 1 and {n_out} (the output's tokens), not {step}")
    row = run.prompt_len - 1 + step - 1
    if token is None:
        token = run.output_ids[step - 1]
    elif isinstance(token, str):
        ids = hm.tokenizer.encode(token)
        if len(ids) != 1:
            raise ValueError(f"{token!r} is {len(ids)} pieces of this model, not one")
        token = ids[0]
    parts = stream_parts(hm, run, "decoder", cfg.n_decoder_layers, "out", [row])
    names = [n for n in parts if n != "bias"] + ["bias"]
    W = model.lm_head.weight.detach().double()[token]                   # [d_model]
    scale = cfg.d_model ** -0.5 if cfg.output_scale else 1.0
    values = torch.stack([parts[n][0] @ W * scale for n in names])
    extra = 0.0
    if model.lm_head.bias is not None:
        extra += float(model.lm_head.bias[token])
    if cfg.logits_bias:
        extra += float(model.logits_bias[token])
    values[-1] += extra
    return LogitTerms(names, values, float(run.logits[row, token]), int(token), row)


@dataclass
class Circuits:
    """What one head does from its weights alone (head_circuits)."""
    positions: Optional[torch.Tensor]    # [n, n]: position i's query against position j's key, no token (None: RoPE or a
                                         # relative bias, where position is no vector of its own)
    copying: torch.Tensor                # [tokens]: each token's rank (0 = first) in the logits its own OV output raises
    tokens: list[int]                    # the token ids `copying` covers
    why_no_positions: str = ""

    def copy_share(self, k: int = 1) -> float:
        """The share of tokens whose OV output raises their own logit among the k highest: a copying head's is high."""
        return float((self.copying < k).double().mean())


def _alone(norm: Optional[nn.Module], rows: torch.Tensor) -> torch.Tensor:
    """Each row through a norm by itself (the weights-only reading: a vector with nothing else in the stream)."""
    if norm is None or isinstance(norm, nn.Identity):
        return rows
    out = frozen_norm(norm, {"x": rows})
    return out["x"] + out.get("bias", 0)


def head_circuits(hm, layer: int, head: int, block: Optional[str] = None, n_positions: int = 32,
                  n_tokens: int = 2000, chunk: int = 256) -> Circuits:
    """One head's circuits from its weights alone, in float64. QK on positions: the positional vectors of positions
    0 … n_positions − 1, each through its embeddings' norm and the norm before the head by itself (pre-norm: the
    block's; a cross-attention's keys: the encoder's final norm), projected by the head's W_Q and W_K with their
    biases: a previous-token head shows its diagonal below the main one with no text. A cross-attention's queries
    are the decoder's positions, its keys the encoder's. OV copying: for the first n_tokens ids that are no special,
    the token's embedding on the side the head reads (its norms by itself) through W_V, W_O and the unembedding;
    each token's rank among the logits it raises (bounded memory: `chunk` tokens at a time over the vocabulary)."""
    cfg, model = hm.cfg, hm.model
    block = block or ("encoder.self_attn" if cfg.n_encoder_layers else "decoder.self_attn")
    stack, site = block.split(".")
    blk = (model.encoder if stack == "encoder" else model.decoder)[layer]
    attn = getattr(blk, site)
    if cfg.qk_norm:
        raise ValueError("a model with a norm on q and k (qk_norm) has no weights-only QK circuit here")
    q_embed = model.enc_embed if stack == "encoder" else model.dec_embed
    k_embed = model.enc_embed if stack == "encoder" or site == "cross_attn" else q_embed
    ln = (blk.ln_cross if site == "cross_attn" else blk.ln1) if blk.pre else None
    q_norms = (getattr(q_embed, "norm", None), ln)
    k_norms = (getattr(k_embed, "norm", None), model.encoder_norm) if site == "cross_attn" else q_norms
    d, rep = attn.d_head, attn.n_heads // attn.n_kv_heads
    divisor = attn.divisor if attn.divisor is not None else d ** 0.5

    def project(linear, x, h):
        W = linear.weight.detach().double()[h * d:(h + 1) * d]
        out = x @ W.T
        return out + linear.bias.detach().double()[h * d:(h + 1) * d] if linear.bias is not None else out

    def normed(x, norms):
        for norm in norms:
            x = _alone(norm, x)
        return x

    positions, why = None, ""
    if hasattr(q_embed, "pos") and hasattr(k_embed, "pos"):
        n = min(n_positions, cfg.max_len)
        P_q, P_k = (normed(e.pos(n, e.pos_offset).detach().double(), ns)       # [n, d_model]
                    for e, ns in ((q_embed, q_norms), (k_embed, k_norms)))
        positions = project(attn.W_Q, P_q, head) @ project(attn.W_K, P_k, head // rep).T / float(divisor)
    else:
        why = "RoPE" if cfg.positional == "rope" else "a relative position bias"
    specials = set(getattr(hm.tokenizer, "specials", ()) or ())
    vocab = model.lm_head.weight.shape[0]
    tokens = [i for i in range(min(vocab, k_embed.W_E.weight.shape[0])) if i not in specials][:n_tokens]
    W_U = model.lm_head.weight.detach().double()                          # [vocab, d_model]
    Wo = attn.W_O.weight.detach().double()[:, head * d:(head + 1) * d]    # [d_model, d_head]
    ranks = []
    for s in range(0, len(tokens), chunk):
        ids = torch.tensor(tokens[s:s + chunk])
        E = k_embed.W_E.weight.detach().double()[ids] * k_embed.scale
        out = project(attn.W_V, normed(E, k_norms), head // rep) @ Wo.T      # [chunk, d_model]
        logits = out @ W_U.T                                              # [chunk, vocab]
        own = logits[torch.arange(len(ids)), ids]
        ranks.append((logits > own[:, None]).sum(1))
    return Circuits(positions, torch.cat(ranks), tokens, why)
