"""viz_transformer: an instrumented Transformer written from scratch, with a capture API.

    from viz_transformer import load_checkpoint
    logits, cache = load_checkpoint("checkpoints/zh-en").run_with_cache("我是一名工程师。")

The packages, bottom to top (each imports only those below it; tests/test_layers.py checks it):
core (the model) < run (running it on text) < analysis (maths on runs) < plots (figures) <
training, export, report < cli. The names the README documents are importable from here.
"""
from importlib import import_module

# Every documented name, imported on first use: `import viz_transformer.plots.diagram` (the Overview a fresh
# server draws before the model is loaded) must not import torch, and pandas stays out of `import viz_transformer`.
LAZY = {
    "list_checkpoints": "core.catalog", "list_roots": "core.catalog", "CheckpointError": "core.checkpoint_files",
    "save_checkpoint": "core.checkpoint", "ModelConfig": "core.config", "Cache": "core.hooks",
    "Transformer": "core.model", "Tokenizer": "core.tokenizer",
    "HookedModel": "run.capture", "Run": "run.capture", "load_checkpoint": "run.capture",
    "Trace": "run.decoding", "decode": "run.decoding", "DecodeSettings": "run.decode_settings",
    "head_ablation_hooks": "run.interventions", "positions_off_hooks": "run.interventions",
    "rank_heads": "run.interventions", "head_means": "run.interventions",
    "logit_lens": "run.lenses", "lens_view": "run.lenses", "patching_scores": "run.patching",
    "rollout": "analysis.summaries", "source_attribution": "analysis.summaries", "head_stats": "analysis.summaries",
    "corpus_head_stats": "analysis.summaries", "head_roles": "analysis.summaries", "assess": "analysis.confidence",
    "attribute": "analysis.attribution", "score_terms": "analysis.score_terms",
    "logit_terms": "analysis.score_terms", "head_circuits": "analysis.score_terms", "term_run": "analysis.score_terms",
    "load_training_snapshots": "training.snapshots", "architecture_diagram": "plots.diagram",
}

__all__ = list(LAZY)


def __getattr__(name: str):
    if name in LAZY:
        value = getattr(import_module(f"viz_transformer.{LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'viz_transformer' has no attribute {name!r}")
