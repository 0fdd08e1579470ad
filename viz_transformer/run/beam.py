"""Beam search with Hugging Face's rules, traced: every step's best hypothesis with its candidates and attention
rows, and every beam after every step (decoding.decode with strategy "beam"; decoding.beam_batch for many texts)."""
from __future__ import annotations

import torch

from viz_transformer.core.config import early_stopping_rule
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.generation import candidates, pattern_names, step_logits
from viz_transformer.run.logit_rules import allowed_logits, only_forced, penalise_repeats, stop_ids
from viz_transformer.run.trace import Beam, Step, Trace


def beam_logp(logits: torch.Tensor, seen: torch.Tensor, cfg, banned: list[int], hf_order: bool,
              last: bool) -> torch.Tensor:
    """Each beam's next-token scores [nb, V] (log-probabilities). This project's models: the never-generated
    ids removed, then log_softmax (their probability goes to the others). An imported model, as Hugging Face's
    beam search: log_softmax of the logits, then the processors on the log-probabilities (repetition
    penalty, bad_words_ids at -inf, and at the last step allowed only [end] at 0 when forced_eos)."""
    if not hf_order:
        return torch.log_softmax(allowed_logits(logits, banned), -1)
    logp = allowed_logits(penalise_repeats(torch.log_softmax(logits, -1), seen, cfg.repetition_penalty), banned)
    if cfg.forced_eos and last:
        logp = only_forced(logp, cfg)
    return logp


def beam_search(model, tok, cache, prompt, trace: Trace, max_new_tokens: int, s: DecodeSettings, banned) -> Trace:
    """Beam search with Hugging Face's rules (transformers' _beam_search): each step ranks the
    K = max(2, 1 + number of end ids) × width best continuations by their summed log-probability. Those among
    the first `width` that end (an end id, or the length limit at the last step) join the ended hypotheses,
    ranked by score / length ** length_penalty, of which the best `width` are kept; the first `width` that
    do not end run on. The search stops at the length limit, or when `width` hypotheses have ended and
    either early_stopping is "true" or the best running beam's score / L ** length_penalty cannot beat the
    worst kept one (L: its length; with "never" and a positive penalty the longest possible length).
    The answer is the best ended hypothesis. Each hypothesis carries its own history of rows and
    candidates, so the trace's steps follow the best one while `beams` shows every beam per step.
    cache: the KV cache after the encoder (start_cache); trace: the empty trace the steps are added to."""
    cfg = model.cfg
    width, length_penalty, n_candidates = s.beam_width, s.length_penalty, s.n_candidates
    early_stopping = early_stopping_rule(s.early_stopping)
    stops = set(stop_ids(cfg))
    keep = max(2, 1 + len(stops)) * width
    hf_order = not getattr(tok, "bans_specials", True)
    names = pattern_names(cfg)
    forced = len(prompt) - 1 if cfg.is_encoder_decoder else 0   # ids generate() forces after the decoder's start (a
                                                                # target language's code): counted in a length
    alive = [{"tokens": [], "score": 0.0, "rows": [], "cands": [], "probs": []}]
    alive_pos = [-1]                 # where each alive hypothesis sits in the previous step's beams
    ended: list[tuple[float, dict]] = []     # (score / length ** length_penalty, hypothesis), best first
    beams_per_step: list[list[Beam]] = []
    cur = torch.tensor([prompt])

    for t in range(max_new_tokens):
        last = t == max_new_tokens - 1
        logits, rows = step_logits(model, cur, cache, [] if hf_order else banned, names)
        seen = torch.tensor([prompt + h["tokens"] for h in alive])
        logp = beam_logp(logits, seen, cfg, banned, hf_order, last)          # (nb, V)
        total = torch.tensor([h["score"] for h in alive]).unsqueeze(1) + logp
        top = torch.topk(total.flatten(), min(keep, total.numel()))
        V = logp.shape[-1]
        nxt_alive, parents, nxt_pos, step_beams = [], [], [], []
        for rank, (score, flat) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
            if score == float("-inf"):                   # a never-generated id: nothing further is possible
                break
            b, token = divmod(flat, V)
            h = alive[b]
            new = {"tokens": h["tokens"] + [token], "score": score,
                   "rows": h["rows"] + [{k: v[b] for k, v in rows.items()}],
                   "cands": h["cands"] + [candidates(tok, logp[b].exp(), n_candidates)],
                   "probs": h["probs"] + [float(logp[b, token].exp())]}
            if token in stops or last:
                if rank < width:                         # only the first `width` may end
                    ended.append((score / (t + 1 + forced) ** length_penalty, new))
                    step_beams.append(Beam(new["tokens"], tok.pieces(new["tokens"]), score, alive_pos[b],
                                           token in stops))
            elif len(nxt_alive) < width:
                nxt_alive.append(new)
                parents.append(b)
                nxt_pos.append(len(step_beams))
                step_beams.append(Beam(new["tokens"], tok.pieces(new["tokens"]), score, alive_pos[b], False))
            if len(nxt_alive) >= width and rank >= width - 1:
                break
        beams_per_step.append(step_beams)
        ended = sorted(ended, key=lambda e: -e[0])[:width]
        if last or not nxt_alive:
            break
        if len(ended) >= width:
            if early_stopping == "true":
                break
            L = forced + (max_new_tokens if early_stopping == "never" and length_penalty > 0 else t + 1)
            if nxt_alive[0]["score"] / L ** length_penalty <= ended[-1][0]:     # no running beam can do better
                break
        alive, alive_pos = nxt_alive, nxt_pos
        cache.reorder(torch.tensor(parents))
        cur = torch.tensor([[h["tokens"][-1]] for h in alive])
    trace.beam_history = beams_per_step
    best = ended[0][1] if ended else alive[0]           # nothing ended: no step ran, or every id was banned
    for i, token in enumerate(best["tokens"]):
        trace.steps.append(Step(i, token, tok.piece(token), best["probs"][i], best["cands"][i],
                                best["rows"][i], beams_per_step[i] if i < len(beams_per_step) else []))
    return trace
