"""What a fresh session starts on: the checkpoints folder, the checkpoint picked first, the example texts.
Light (no torch), so a fresh server's first page can read them while the model is still loading."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = "zh-en-postnorm"           # picked first when it loads; else the first that does (viz_explorer/kit/sidebar.py)
EXAMPLES = {"translator": ["我是一名工程师。", "我爱你。", "今天天气很好。", "我的猫喜欢睡觉。",
                           "你叫什么名字？"],
            "lm": ["Once upon a time there was a little dog.", "The cat sat on the mat and looked at the bird.",
                   "Lily wanted to play in the park, but it was raining."]}
# a masked LM's examples hold a blank (BERT's [MASK]; a RoBERTa-style folder's mask token is another: the fill
# page says which), in both of our masked LM's languages, one a sentence pair
MLM_EXAMPLES = ["我是一名工[MASK]师。", "I [MASK] you.", "今天天气很[MASK]。", "我喜欢喝[MASK]。 [SEP] I like to drink tea."]
SECOND = {"translator": ["好。", "我们明天早上八点在学校门口见面，然后一起坐火车去北京。"],   # padding demo:
          "lm": ["Hi.", "The little dog ran to the park and played with his friends all day."]}  # one is picked


SHIPPED = ROOT / "checkpoints"


def checkpoint_roots() -> list[Path]:
    """Where the sidebar looks for models, in order: the shipped checkpoints folder, then every root in
    VIZ_CHECKPOINTS (separated as PATH is: ':' on Linux and macOS, ';' on Windows; a root may be a folder of
    models or one model folder). VIZ_CHECKPOINTS_ONLY=1 lists the given roots alone (the tests' isolation).
    A name a later root repeats gets its root's name after it (core.catalog.list_roots)."""
    given = [Path(p).expanduser() for p in os.environ.get("VIZ_CHECKPOINTS", "").split(os.pathsep) if p.strip()]
    if os.environ.get("VIZ_CHECKPOINTS_ONLY", "").lower() in ("1", "true", "yes") and given:
        return given
    return [SHIPPED] + [p for p in given if p.resolve() != SHIPPED.resolve()]


def checkpoints_root() -> Path:
    """The first root (checkpoint_roots): the folder messages name."""
    return checkpoint_roots()[0]


def kind(cfg) -> str:
    """Which examples a model gets: "translator" or "lm" (a config of None: "lm")."""
    return "translator" if cfg is not None and cfg.is_translator else "lm"


def examples(cfg) -> list[str]:
    """The sidebar's examples for a model: a masked LM's hold a blank, else its kind's (EXAMPLES)."""
    if cfg is not None and cfg.is_encoder_only and cfg.head == "mlm":
        return MLM_EXAMPLES
    return EXAMPLES[kind(cfg)]
