"""viz_transformer: an instrumented Transformer written from scratch, with a capture API.

    from viz_transformer import load_checkpoint
    logits, cache = load_checkpoint("checkpoints/zh-en").run_with_cache("我是一名工程师。")
"""
from viz_transformer.run.capture import HookedModel, Run, load_checkpoint
from viz_transformer.core.checkpoint import CheckpointError, list_checkpoints, save_checkpoint
from viz_transformer.core.config import ModelConfig
from viz_transformer.run.decoding import Trace, decode
from viz_transformer.core.hooks import Cache
from viz_transformer.core.model import Transformer
from viz_transformer.core.tokenizer import Tokenizer

__all__ = ["Cache", "CheckpointError", "HookedModel", "ModelConfig", "Run", "Tokenizer", "Trace",
           "Transformer", "decode", "list_checkpoints", "load_checkpoint", "save_checkpoint"]
