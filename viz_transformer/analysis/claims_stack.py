"""Lesson facts about the stack as a whole: how long the residual stream grows, gradients at initialisation and the
learning-rate schedule (LayerNorm, pre- against post-norm), attention against attribution, and the jobs heads do.
Registered in fact_core.KINDS (claims imports this module)."""
from __future__ import annotations

from viz_transformer.analysis.fact_core import Fact, kind, shared_run


# -- LayerNorm and the residual stream ------------------------------------------------------------------------
GROWS = 1.5           # "the residual stream grows": its mean length after the last layer ÷ at the input


def residual_lengths(hm, text: str) -> list[float]:
    """The residual stream's mean length (L2 norm over d_model, averaged over positions) at the input of the first
    stack (the encoder's, else the decoder's) and after each of its layers."""
    run = shared_run(hm, text)
    part = "encoder" if hm.cfg.n_encoder_layers else "decoder"
    n = hm.cfg.n_encoder_layers or hm.cfg.n_decoder_layers
    names = [f"{part}.0.hook_resid_pre"] + [f"{part}.{i}.hook_resid_post" for i in range(n)]
    return [float(run.cache[x][0].float().norm(dim=-1).mean()) for x in names]


@kind
def residual_norms(hm, text: str, grows: bool) -> Fact:
    """How long the residual stream gets through the first stack (residual_lengths). Claim: it grows (the last
    layer's length ≥ GROWS × the input's: pre-norm, x + f(LN(x)), is never renormalised) or stays level (post-norm,
    LN(x + f(x)), renormalises after every sublayer), as `grows` says."""
    n = residual_lengths(hm, text)
    ratio = n[-1] / n[0]
    return Fact({"first": n[0], "last": n[-1], "ratio": ratio, "layers": len(n) - 1, "norm": hm.cfg.norm},
                (ratio >= GROWS) == grows, f"the residual stream {'grows' if grows else 'does not grow'} "
                f"{GROWS}× or more through the layers")


@kind
def init_gradients(hm, text: str) -> Fact:
    """The gradient norms at initialisation that meta.json records (training/grad_norms.py: this model's config
    freshly initialised with the norm before and after the residual, one backward of the training loss, averaged
    over seeds). Claim (Xiong et al. 2020): post-norm's last layer gets a larger gradient, relative to its first
    layer, than pre-norm's."""
    g = (hm.meta or {}).get("init_grad_norms")
    if not g:
        raise ValueError("this checkpoint's meta.json records no gradient norms at initialisation (init-grads)")
    pre, post = g["pre"], g["post"]
    return Fact({"pre_first": pre[0], "pre_last": pre[-1], "post_first": post[0], "post_last": post[-1],
                 "pre_ratio": pre[-1] / pre[0], "post_ratio": post[-1] / post[0], "seeds": len(g["seeds"]),
                 "layers": len(g["layers"])}, post[-1] / post[0] > pre[-1] / pre[0],
                "at initialisation post-norm's last layer's gradient, relative to its first, exceeds pre-norm's")


@kind
def training_schedule(hm, text: str) -> Fact:
    """How meta.json says the model was trained: the learning-rate warm-up (updates), the schedule after it, the
    peak rate, the norm placement. Claim: the record has them."""
    tc = (hm.meta or {}).get("train_config") or {}
    ok = all(k in tc for k in ("warmup", "schedule", "lr"))
    return Fact({"warmup": tc.get("warmup", 0), "schedule": tc.get("schedule", ""), "lr": tc.get("lr", 0.0),
                 "norm": hm.cfg.norm}, ok, "meta.json records the warm-up, the schedule and the learning rate")


# -- attention against attribution ---------------------------------------------------------------------------
@kind
def attention_vs_occlusion(hm, text: str, step: int, agree: bool) -> Fact:
    """For output step `step`: the input piece whose zeroed embedding drops log p of the written word the most
    (occlusion, analysis.attribution) and the one attention reads most (mean over heads and layers). Claim: they
    are the same piece (agree) or two different pieces (not agree)."""
    from viz_transformer.analysis import attribution
    tgt = attribution.step_target(hm, shared_run(hm, text), step)
    occ, att = attribution.grads.occlusion(hm, tgt), attribution.attention_row(hm, tgt)
    best, looked = int(occ.argmax()), int(att.argmax())
    return Fact({"word": hm.tokenizer.pieces([tgt.token])[0], "occ": tgt.pieces[best], "drop": float(occ[best]),
                 "att": tgt.pieces[looked], "weight": float(att[looked]), "att_drop": float(occ[looked])},
                (best == looked) == agree,
                f"at step {step} occlusion's top piece and attention's {'are' if agree else 'are not'} the same")


# -- heads and their jobs ------------------------------------------------------------------------------------
ROLE_NAMES = {"previous-token": "prev_token", "first-token sink": "first_token", "self": "self",
              "end-token sink": "last_token"}


def _roles(hm, text: str):
    from viz_transformer.analysis import summaries
    return summaries.head_roles(summaries.head_stats(shared_run(hm, text)))


@kind
def role_head(hm, text: str, block: str, role: str) -> Fact:
    """Selector: the head of `block` whose statistic for `role` (summaries.head_roles' names: previous-token,
    first-token sink, self, end-token sink) is the largest. Claim: that head plays the role (its statistic carries
    at least ROLE_THRESHOLD of the weight)."""
    from viz_transformer.analysis.summaries import ROLE_THRESHOLD
    if role not in ROLE_NAMES:
        raise ValueError(f"role must be one of {', '.join(ROLE_NAMES)}, not {role!r}")
    df = _roles(hm, text)
    df = df[df["block"] == block]
    if df.empty:
        raise ValueError(f"this model has no {block}")
    r = df.loc[df[ROLE_NAMES[role]].idxmax()]
    return Fact({"layer": int(r["layer"]), "head": int(r["head"]), "value": float(r[ROLE_NAMES[role]]),
                 "count": int((df["role"] == role).sum()), "heads": len(df)}, r["role"] == role,
                f"some head of {block} is a {role} head (its statistic ≥ {ROLE_THRESHOLD})")


@kind
def layer_roles(hm, text: str, block: str, layer: int) -> Fact:
    """The roles of one layer's heads. Claim: they do different jobs: at least two different clear roles."""
    df = _roles(hm, text)
    df = df[(df["block"] == block) & (df["layer"] == layer)]
    clear = sorted({r for r in df["role"] if r})
    return Fact({"distinct": len(clear), "roles": ", ".join(clear), "heads": len(df),
                 "unclear": int((df["role"] == "").sum())}, len(clear) >= 2,
                f"the heads of {block} layer {layer} play at least two different roles")
