"""viz_transformer: an instrumented Transformer written from scratch, with a capture API.

    from viz_transformer import load_checkpoint
    logits, cache = load_checkpoint("checkpoints/zh-en").run_with_cache("我是一名工程师。")

The packages, bottom to top (each imports only those below it; tests/test_layers.py checks it):
core (the model) < run (running it on text) < analysis (maths on runs) < plots (figures) <
training, export, report < cli. The names the README documents are importable from here.
"""
from importlib import import_module

from viz_transformer.core.catalog import list_checkpoints
from viz_transformer.core.checkpoint import CheckpointError, save_checkpoint
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.hooks import Cache
from viz_transformer.core.model import Transformer
from viz_transformer.core.tokenizer import Tokenizer
from viz_transformer.run.capture import HookedModel, Run, load_checkpoint
from viz_transformer.run.decoding import Trace, decode

# documented in the README, imported on first use (pandas and the analysis code stay out of `import viz_transformer`)
LAZY = {
    "head_ablation_hooks": "run.interventions", "positions_off_hooks": "run.interventions",
    "rank_heads": "run.interventions", "head_means": "run.interventions",
    "logit_lens": "run.lenses", "lens_view": "run.lenses", "patching_scores": "run.patching",
    "rollout": "analysis.summaries", "source_attribution": "analysis.summaries", "head_stats": "analysis.summaries",
    "corpus_head_stats": "analysis.summaries", "head_roles": "analysis.summaries", "assess": "analysis.confidence",
    "load_training_snapshots": "training.snapshots", "architecture_diagram": "plots.diagram",
}

__all__ = ["Cache", "CheckpointError", "HookedModel", "ModelConfig", "Run", "Tokenizer", "Trace",
           "Transformer", "decode", "list_checkpoints", "load_checkpoint", "save_checkpoint", *LAZY]


def __getattr__(name: str):
    if name in LAZY:
        value = getattr(import_module(f"viz_transformer.{LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'viz_transformer' has no attribute {name!r}")
