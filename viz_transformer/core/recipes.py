"""Which checkpoints may be compared: the same data, split and budget (issue 23).

A comparison of architectures means something only when the models learned from the same pairs for the
same number of updates; a pre-norm model and its post-norm twin, likewise. `recipe` is that key, read from
the `train_config` and `split` a training run writes into meta.json. Pure functions over catalog entries
(`core.catalog.CheckpointInfo`): nothing is loaded.
"""
from __future__ import annotations

from typing import Iterable, Optional

from viz_transformer.core.config import ARCHITECTURES

# what makes two runs' data and budget equal; the architecture and its size are compared separately
RECIPE_KEYS = ("data", "extra_train", "seed", "vocab_size", "epochs", "batch_size", "max_tokens")
TWIN_KEYS = ("architecture", "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "vocab_size")


def recipe(meta: Optional[dict]) -> Optional[tuple]:
    """(split, the train_config values of RECIPE_KEYS, whether CJK characters are one piece each), or None for a
    folder that does not say how it was trained.
    A fine-tuned model (meta.json's `init_from`, written by training.train) adds the recipe of the model it
    started from and its peak rate: two fine-tunes compare only when both stages match."""
    tc = (meta or {}).get("train_config")
    if not isinstance(tc, dict):
        return None
    key = (meta.get("split"),) + tuple(tc.get(k) for k in RECIPE_KEYS)
    base = meta.get("init_from")
    if isinstance(base, dict):
        key += (recipe(base), tc.get("lr"))
    key += (bool(tc.get("cjk_chars")),)                     # the pieces
    return key


def _usable(infos: Iterable) -> list:
    return [i for i in infos if i.error is None and i.config is not None and i.config.is_translator]


def comparison(infos: Iterable) -> dict:
    """{architecture: info}, in reading order: one translator per architecture, taken from the largest set
    trained on one recipe (pre-norm first, then by name: a post-norm twin is not "the" model). Ties go to the
    source-disjoint split, then to the longer budget. So a better-trained model of one architecture never
    stands beside shorter-trained models of the others while an equal set exists. An architecture that set
    lacks comes from the next best set (`same_recipe` then says False)."""
    groups: dict = {}
    for info in sorted(_usable(infos), key=lambda i: (i.config.norm != "pre", i.name)):
        groups.setdefault(recipe(info.meta), {}).setdefault(info.config.architecture, info)

    def rank(item):
        key, found = item
        epochs = key[1 + RECIPE_KEYS.index("epochs")] if key else None
        return (-len(found), (key or (None,))[0] != "by_source", -(epochs or 0))
    chosen: dict = {}
    for _, found in sorted(groups.items(), key=rank):
        for arch, info in found.items():
            chosen.setdefault(arch, info)
    return {arch: chosen[arch] for arch in ARCHITECTURES if arch in chosen}


def same_recipe(infos: Iterable) -> bool:
    """Whether these checkpoints were all trained on one known recipe."""
    keys = {recipe(i.meta) for i in infos}
    return len(keys) == 1 and None not in keys


def is_twin(pre, post) -> bool:
    """`post` is `pre` trained again with the norm after the residual: same architecture, size, data, split, budget."""
    return (pre.config.norm, post.config.norm) == ("pre", "post") \
        and all(getattr(pre.config, k) == getattr(post.config, k) for k in TWIN_KEYS) \
        and recipe(pre.meta) is not None and recipe(pre.meta) == recipe(post.meta)


def post_norm_translators(infos: Iterable) -> list:
    """The post-norm translators, by name (a post-norm model may ship before its pre-norm twin is trained)."""
    return sorted((i for i in _usable(infos) if i.config.norm == "post"), key=lambda i: i.name)


def norm_pair(infos: Iterable, prefer: Optional[str] = None) -> Optional[tuple]:
    """(pre, post) infos of a pre-norm translator and its post-norm twin, or None. The pair whose pre-norm
    model is named `prefer` (the comparison's encoder-decoder) comes first, then by name."""
    found = sorted(_usable(infos), key=lambda i: i.name)
    pairs = [(a, b) for a in found for b in found if is_twin(a, b)]
    pairs.sort(key=lambda p: p[0].name != prefer)
    return pairs[0] if pairs else None


def other_differences(infos: Iterable) -> dict:
    """What differs between models trained on one recipe besides their architecture: {"norm": {"post": [names],
    "pre": [names]}, "schedule": {"inverse_sqrt": [...], "cosine": [...]}}, each only when its values differ.
    The recipe fixes data and budget, not how the layers are normalised nor how the learning rate moves; a page
    that compares architectures says so instead of crediting these to the architecture."""
    infos = list(infos)
    values = {"norm": [i.config.norm for i in infos],
              "schedule": [((i.meta or {}).get("train_config") or {}).get("schedule", "cosine") for i in infos]}
    out = {}
    for key, vals in values.items():
        if len(set(vals)) > 1:
            out[key] = {v: [i.name for i, w in zip(infos, vals) if w == v] for v in dict.fromkeys(vals)}
    return out
