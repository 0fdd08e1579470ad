"""viz_transformer: an instrumented Transformer written from scratch, with a capture API.

    from viz_transformer import load_checkpoint
    logits, cache = load_checkpoint("checkpoints/zh-en").run_with_cache("我是一名工程师。")
"""
from .capture import HookedModel, Run, load_checkpoint
from .checkpoint import CheckpointError, list_checkpoints, save_checkpoint
from .config import ModelConfig
from .decoding import Trace, decode
from .hooks import Cache
from .model import Transformer
from .tokenizer import Tokenizer

__all__ = ["Cache", "CheckpointError", "HookedModel", "ModelConfig", "Run", "Tokenizer", "Trace",
           "Transformer", "decode", "list_checkpoints", "load_checkpoint", "save_checkpoint"]
