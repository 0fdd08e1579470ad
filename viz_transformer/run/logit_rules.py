"""What a model may generate at a step, as rules on its logits: the ids never generated, the ids that end a
generation, the id forced at the length limit, and the repetition penalty.

[pad], [unk] and [begin] are never generated: every strategy masks them out of the distribution (a generated
[pad] would silently become a masked key).
"""
from __future__ import annotations

import torch

from viz_transformer.core.tokenizer import Tokenizer


def never_generated(tok: Tokenizer) -> list[int]:
    """Ids no strategy may choose: [pad], [unk], [begin]; for an imported model (its tokenizer says
    bans_specials = False) only its generation_config's single-token bad_words_ids, as Hugging Face's
    generate does."""
    if not getattr(tok, "bans_specials", True):
        return list(getattr(tok, "banned", []))
    return sorted(i for i in {tok.pad_id, tok.unk_id, tok.bos_id} if i >= 0)


def allowed_logits(logits: torch.Tensor, banned: list[int]) -> torch.Tensor:
    """Logits [..., V] with the never-generated ids at -inf (so softmax gives them 0)."""
    if not banned:
        return logits
    return logits.index_fill(-1, torch.tensor(banned, dtype=torch.long, device=logits.device), float("-inf"))


def forced_id(cfg) -> int:
    """The id a forced_eos config forces at the length limit: [end], or the folder's forced_eos_token_id when it is
    another id (transformers' ForcedEOSTokenLogitsProcessor forces it whatever the end id is)."""
    return cfg.forced_eos_id if cfg.forced_eos_id >= 0 else cfg.eos_id


def stop_ids(cfg) -> list[int]:
    """The ids that end a generation: [end], and an imported model's other end-of-sequence ids."""
    return [cfg.eos_id, *cfg.stop_ids]


def penalise_repeats(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """A generation config's repetition_penalty, as Hugging Face applies it: the logit of every id already in the
    sequence (prompt included) divided by the penalty, or multiplied when it is negative. logits [B, V], seen [B, T]."""
    if penalty == 1.0:
        return logits
    score = logits.gather(-1, seen)
    return logits.scatter(-1, seen, torch.where(score < 0, score * penalty, score / penalty))


def only_forced(logits: torch.Tensor, cfg) -> torch.Tensor:
    """Scores [..., V] that allow the forced id alone (0, every other id -inf): a forced_eos model's last step."""
    return torch.full_like(logits, float("-inf")).index_fill(
        -1, torch.tensor([forced_id(cfg)], device=logits.device), 0.0)
