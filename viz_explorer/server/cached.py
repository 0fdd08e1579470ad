"""The app's caches: one loaded model per checkpoint folder, and the runs and traces made with it.

Keys include the folder's newest file time, so a checkpoint rewritten by training is reloaded. Every result
(runs, traces, batches, lens tables, patching scores, reports, corpus results, the compared models' views,
training snapshots, parity checks, a model's facts, a lesson's facts) lives in one memo (@heavy) shared by every
session and bounded in bytes by a budget fixed at start-up (VIZ_CACHE_MB, default
DEFAULT_CACHE_MB), least recently used out first; a value larger than the budget is computed for its request and
not kept (a text's run that large is kept in the asking session instead: run_text). Its runs keep attention
scores and patterns as recomputed-on-read (viz_transformer.run.derived_cache), never holding every block's at
once (hm.run(lean=True): a 2,048-piece text on a Qwen2.5-0.5B-sized model). A value there is shared, never
copied: callers read it and do not change it. The loaded models (load_model, a sentence encoder's pipeline) are
outside the budget, at most max_entries of each: the only other caches.
"""
from __future__ import annotations

import functools
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import streamlit as st

from viz_transformer import decode, load_checkpoint
from viz_explorer.server import allocator
from viz_explorer.server import corpus_jobs, env_sizes
from viz_explorer.server import model_key
from viz_explorer.server import threads
from viz_transformer.analysis import attention_maths, piece_labels
from viz_transformer.analysis import score_terms
from viz_transformer.analysis import summaries
from viz_transformer.analysis import training_curves
from viz_transformer.core import recipes
from viz_transformer.run import forced
from viz_transformer.run import interventions
from viz_transformer.run import lenses
from viz_transformer.run import patching
from viz_transformer.run import permute
from viz_transformer.run import capture as runs
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.derived_cache import patterns_only, shown_captures
from viz_transformer.run.capture import WEIGHT_DTYPES, pick_device
from viz_explorer.server.byte_lru import ByteLRU
from viz_explorer.server.defaults import checkpoint_roots, checkpoints_root  # noqa: F401  (cached.checkpoints_root:
                                                                             # the pages' name for it)
from viz_transformer.core.config import ModelConfig
from viz_transformer.training.snapshots import has_training_snapshots
from viz_transformer.training.snapshots import load_training_snapshots



def folder_stamp(path) -> float:
    """Newest mtime of a checkpoint folder's files: part of every cache key."""
    if path is None:
        return 0.0
    with os.scandir(model_key.folder_of(path)) as files:        # one directory read (every poll of a class asks)
        return max((f.stat().st_mtime for f in files if not f.name.startswith(".") and f.is_file()), default=0.0)


DEFAULT_CACHE_MB = 48         # one text of 512 pieces and what every page computes from it (its run is 26-33 MiB),
                              # or hundreds of sentences (benchmarks/bench_memory.py: the server's RSS)




def cache_budget(environ=os.environ) -> int:
    """The memo's size in bytes: VIZ_CACHE_MB (MiB; 0 keeps nothing), else DEFAULT_CACHE_MB; a value that is not a
    number of MiB, 0 or more, is logged and the default holds (the server still starts: env_sizes)."""
    return env_sizes.mib_bytes("VIZ_CACHE_MB", DEFAULT_CACHE_MB, environ)


@st.cache_resource(show_spinner=False)
def memo() -> ByteLRU:
    """The memo every session shares. Tensors of 1 MiB and more get their own mappings, so what the memo
    drops goes back to the system; smaller freed pages are handed back after each eviction."""
    allocator.fix_mmap_threshold()
    return ByteLRU(cache_budget(), on_evict=allocator.release_free_memory)


def heavy(fn):
    """Memoize fn in the shared byte-bounded memo, keyed by its qualified name and arguments."""
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def cached(*args, **kw):
        return memo().get((name, args, tuple(sorted(kw.items()))), lambda: fn(*args, **kw))
    return cached


def weight_settings() -> tuple[str, str]:
    """(dtype, device) for loading: VIZ_DTYPE (float32, the default, or bfloat16: half the memory) and VIZ_DEVICE
    (auto, the default: a GPU when torch sees one; cpu; cuda). An unknown value, or cuda on a machine without a
    GPU, falls back to the default (the app still starts)."""
    dtype = os.environ.get("VIZ_DTYPE", "").strip().lower() or "float32"
    device = os.environ.get("VIZ_DEVICE", "").strip().lower() or "auto"
    dtype = dtype if dtype in WEIGHT_DTYPES else "float32"
    try:
        pick_device(device)
    except ValueError:
        device = "auto"
    return dtype, device


# (path, stamp) -> the model load_model loaded, while anything holds it: a model load_model's cache let go of is
# gone from here too, so model_once never brings an evicted model back into the cache
_loaded: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def loaded_models() -> set:
    """(path, stamp) of the models loaded by load_model that are still held."""
    return set(_loaded.keys())


def loaded_model_bytes() -> dict:
    """{path: bytes} of the weights and buffers each held model keeps in memory (a checkpoint saved in 16 bits is
    read as float32: twice its file)."""
    from viz_explorer.server.byte_lru import nbytes
    return {path: nbytes([*hm.model.parameters(), *hm.model.buffers()]) for (path, _), hm in list(_loaded.items())}


@st.cache_resource(show_spinner=False, max_entries=6)
def load_model(path: str, stamp: float):
    """The models the pages run (the sidebar's, ~30 MB each for ours) stay loaded. The architecture
    comparison does not keep its three: it reads each once per text (model_once, model_facts). A key with a
    language pair (server.model_key) is the folder's model read with that pair: the weights are the folder's."""
    pair = model_key.pair_of(path)
    if pair is not None:
        return load_model(model_key.folder_of(path), stamp).with_languages(*pair)
    dtype, device = weight_settings()
    hm = _loaded[(path, stamp)] = load_checkpoint(path, dtype=dtype, device=device)
    return hm


def model_once(path: str, stamp: float):
    """The model for a view cached whole (arch_view): the one load_model loaded while it is still held, else one
    loaded for this call; either way this call keeps nothing. Keeping the comparison's three translators loaded
    would hold a class server's memory for a page that reads each once per text; a load is cheap beside it
    (load_weights skips random init)."""
    hm, pair = _loaded.get((model_key.folder_of(path), stamp)), model_key.pair_of(path)
    if hm is None:                       # not loaded, or let go: loaded for this call (and not into the cache)
        dtype, device = weight_settings()
        hm = load_checkpoint(model_key.folder_of(path), dtype=dtype, device=device)
    return hm if pair is None else hm.with_languages(*pair)


@dataclass(frozen=True)
class ModelFacts:
    """What a page says of a model without its weights: its config, meta.json and parameter count."""
    cfg: ModelConfig
    meta: dict
    n_params: int


@heavy
def model_facts(path: str, stamp: float) -> ModelFacts:
    from viz_transformer import list_checkpoints, list_roots
    from viz_transformer.core.checkpoint import n_parameters
    path = model_key.folder_of(path)
    info = next((i for i in list_roots(checkpoint_roots()) if i.path == Path(path)), None)
    if info is None:                                    # a path the roots do not list (a lesson's, a test's)
        info = next(i for i in list_checkpoints(Path(path).parent) if i.path == Path(path))
    return ModelFacts(info.config, info.meta or {}, n_parameters(info.config))


BIG_RUN = "_big_run"      # session_state: (key, run) of this session's text run too large for the memo


def _run_key(path: str, stamp: float, text: str) -> tuple:
    return ("run_text", (path, stamp, text), ())


def run_text(path: str, stamp: float, text: str, runs: int = 1):
    """The text's run, memoized like @heavy and kept after the page results computed from it (lasting). A run
    larger than the memo's whole budget (a Qwen2.5-0.5B-sized model's at 128 tokens is a few hundred MB) is kept in
    the asking session alone, its latest such run only, so that session's pages do not run the model again and the
    shared budget stays what was configured. runs: how many texts' runs the calling page reads together (2 on the
    pages that compare two texts: the session keeps both)."""
    return _lasting(_run_key(path, stamp, text), BIG_RUN, runs,
                    lambda: load_model(path, stamp).run(text, names_filter=shown_captures, lean=True))


def _lasting(key: tuple, slot: str, runs: int, build):
    """build() memoized under key and kept after the results computed from it; a value larger than the memo's whole
    budget is kept in the asking session's `slot` instead, its latest `runs` such values only."""
    session = _session()
    kept = session.get(slot) or {}
    if key in kept:
        return kept[key]
    value = memo().get(key, build, lasting=True)
    if key not in memo():
        session[slot] = {**dict(list(kept.items())[-(runs - 1):] if runs > 1 else []), key: value}
    return value


TERM_RUN = "_big_term_run"     # session_state: this session's term run too large for the memo


def term_run(path: str, stamp: float, text: str, output_ids: tuple):
    """The run "Why this attention" splits (analysis.score_terms.term_run: each head's z and each MLP's activations,
    which the shared run leaves out), its output (the shared run's output_ids) teacher-forced, kept as run_text keeps
    its run."""
    return _lasting(("term_run", (path, stamp, text, output_ids), ()), TERM_RUN, 1,
                    lambda: score_terms.term_run(load_model(path, stamp), text, output_ids))


@heavy
def circuits(path: str, stamp: float, block: str, layer: int, head: int):
    """One head's weight-only circuits (analysis.score_terms.head_circuits)."""
    return score_terms.head_circuits(load_model(path, stamp), layer, head, block)


def _session():
    """This script run's session state; a throwaway dict outside one (a warm-up thread, a benchmark)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    return st.session_state if get_script_run_ctx(suppress_warning=True) is not None else {}


def run_once(path: str, stamp: float, text: str, hm=None):
    """The text's run as run_text keeps it when a page made it already; else a run of `hm` (default: the kept
    model) that is not kept (a view cached whole, like arch_view, reads it once: the memo held every compared
    model's 512-piece run, up to 67 MiB each, for no later reader)."""
    kept = memo().peek(_run_key(path, stamp, text))
    return kept if kept is not None else (hm or load_model(path, stamp)).run(text, lean=True)


@heavy
def trace(path: str, stamp: float, text: str, settings: DecodeSettings = DecodeSettings()):
    """decode() with `settings` (the default: greedy, the model's own knobs); a greedy trace the text's run already
    made (its continuation) is read off that run."""
    return decode(load_model(path, stamp), text, settings, known=run_text(path, stamp, text).trace)


def _is_mask(name: str) -> bool:
    return name.endswith(".hook_mask")


@heavy
def padded(path: str, stamp: float, text: str, other: str):
    """The two-text batch of the masks page, which reads only its masks."""
    return runs.padded_batch(load_model(path, stamp), text, other, names_filter=_is_mask)


@heavy
def qk_variance() -> dict:
    return attention_maths.qk_variance()


# -- the lab: intervened runs, keyed by what was knocked out ------------------------------------------
@heavy
def head_means(path: str, stamp: float, text: str):
    return interventions.head_means(load_model(path, stamp), text)


def ablation_hooks(path: str, stamp: float, text: str, heads: tuple, mode: str) -> list:
    means = head_means(path, stamp, text) if mode == "mean" and heads else None
    return interventions.head_ablation_hooks(list(heads), mode, means, cfg=load_model(path, stamp).cfg)


def ablated(path: str, stamp: float, text: str, heads: tuple, mode: str):
    """(the intervened run, the logits of the original run's exact ids under the same ablation).
    With no head knocked out that is the original run and its own logits: no second model run."""
    if not heads:
        run = run_text(path, stamp, text)
        return run, run.logits
    return _ablated(path, stamp, text, heads, mode)


@heavy
def _ablated(path: str, stamp: float, text: str, heads: tuple, mode: str):
    hm = load_model(path, stamp)
    hooks = ablation_hooks(path, stamp, text, heads, mode)
    return (hm.run(text, names_filter=patterns_only, fwd_hooks=hooks, lean=True),      # its page reads the output
            forced.forced_logits(hm, run_text(path, stamp, text), hooks))                # and patterns alone


@heavy
def positions_off(path: str, stamp: float, text: str):
    """The run with every position signal taken out: its page reads the output, the patterns and (a translator)
    the encoder's outputs, which the order test compares."""
    hm = load_model(path, stamp)
    outputs = permute.encoder_outputs_name(hm.cfg)
    return hm.run(text, names_filter=lambda n: patterns_only(n) or n == outputs,
                  fwd_hooks=interventions.positions_off_hooks(hm), lean=True)


@heavy
def order_test(path: str, stamp: float, text: str, how: str, positions: bool):
    """permute.order_test of the text's run, with or without positions: the unpermuted side's output and (a
    translator) encoder outputs are read off the cached run made under the same hooks, not computed again."""
    hm = load_model(path, stamp)
    own = run_text(path, stamp, text) if positions else positions_off(path, stamp, text)    # cached runs
    # without positions a translator's encoder outputs permute with its input and cross-attention reads them as a
    # set, so the permuted input's output should be the text's own: checked in one forward, decoded if not
    same = own.output_ids if not positions and hm.cfg.is_encoder_decoder else None
    return permute.order_test(hm, run_text(path, stamp, text).input, how,
                              () if positions else interventions.positions_off_hooks(hm), output=own.output,
                              outputs=permute.run_outputs(own, hm.cfg), same_output=same)


# -- models side by side, and attention over training ------------------------------------------------
@heavy
def snapshots(path: str, stamp: float):
    return load_training_snapshots(path)


@heavy
def training_roles(path: str, stamp: float):
    """Every head's role at every recorded training step (analysis.summaries.roles_over_training)."""
    return summaries.roles_over_training(snapshots(path, stamp))


def with_snapshots() -> list[str]:
    """The names of every listed checkpoint that has a training playback (training_snapshots.json), in the
    catalog's order; only the files' presence is checked."""
    from viz_transformer import list_roots
    return [info.name for info in list_roots(checkpoint_roots())
            if info.error is None and has_training_snapshots(info.path)]


def playback_origin(meta: dict) -> dict:
    """Where a playback's step 0 stands (analysis.training_curves.playback_origin), an ancestor that is listed
    here named as the sidebar names it (matched by its weights' checksum)."""
    from viz_transformer import list_roots
    from viz_transformer.core.checkpoint import CHECKSUM
    known = {info.meta[CHECKSUM]: info.name for info in list_roots(checkpoint_roots())
             if info.error is None and isinstance(info.meta, dict) and info.meta.get(CHECKSUM)}
    return training_curves.playback_origin(meta, known)


def from_scratch_playbacks() -> list[str]:
    """The listed checkpoints whose playback starts from random weights."""
    from viz_transformer import list_roots
    return [info.name for info in list_roots(checkpoint_roots())
            if info.error is None and has_training_snapshots(info.path) and isinstance(info.meta, dict)
            and training_curves.playback_origin(info.meta)["from_scratch"]]


def comparison() -> dict:
    """The comparison's translators, {architecture: CheckpointInfo} in reading order: one usable translator per
    architecture, those trained on one recipe (data, split, budget) first (core.recipes.comparison)."""
    from viz_transformer import list_checkpoints
    return recipes.comparison(list_checkpoints(checkpoints_root()))


def norm_pair(prefer: Optional[Path] = None) -> Optional[tuple[Path, Path]]:
    """(pre, post): a pre-norm translator and its post-norm twin (same architecture, size, data, split and
    budget: core.recipes), the one whose pre-norm model is `prefer` first; or None."""
    from viz_transformer import list_checkpoints
    pair = recipes.norm_pair(list_checkpoints(checkpoints_root()), prefer.name if prefer else None)
    return (pair[0].path, pair[1].path) if pair else None


def post_norm_models() -> list[Path]:
    """The post-norm translators among the checkpoints, by name (shown with their sweep while they have no twin)."""
    from viz_transformer import list_checkpoints
    return [i.path for i in recipes.post_norm_translators(list_checkpoints(checkpoints_root()))]


@heavy                    # ~0.6 MiB for a 512-piece text
def arch_view(path: str, stamp: float, text: str) -> dict:
    """What the architecture comparison shows of one model's run, small enough to keep: the output, where
    the target reads the source at the first and last decoder layer, the layer-0 masks with their pieces,
    the segments, the singular values of every self-attention pattern (architectures.self_spectra). Three
    models' full runs did not fit the memo together, and each visit re-ran them."""
    from viz_transformer.analysis import architectures
    from viz_transformer.analysis import confidence
    hm = model_once(path, stamp)
    cfg, run = hm.cfg, run_once(path, stamp, text, hm)
    reads = {layer: architectures.source_attention(run, cfg, layer) for layer in {0, cfg.n_decoder_layers - 1}}
    blocks = ["encoder.self_attn", "decoder.self_attn"] if cfg.is_encoder_decoder else ["decoder.self_attn"]
    masks = {b: (run.cache[architectures.hook_name(b, 0, "hook_mask")][0, 0].clone(),
                 run.src_pieces if b == "encoder.self_attn" else run.tgt_pieces) for b in blocks}
    return {"output": run.output, "reads": reads, "masks": masks, "segments": architectures.segments(run, cfg),
            "confidence": confidence.assess(hm, run),
            "spectra": architectures.self_spectra(run, cfg),
            "example": piece_labels.example_row(run.tgt_pieces, run.predicted, run.prompt_len - 1)}


def rank_tables(views: dict):
    """Effective rank of every self-attention head of each model (one DataFrame); views: {arch: arch_view}."""
    import pandas as pd
    from viz_transformer.analysis import architectures
    return pd.concat([architectures.spectra_table(v["spectra"], arch) for arch, v in views.items()],
                     ignore_index=True)


def spectra(views: dict, depth: str) -> dict:
    """{(architecture, block): singular values [head, m]} of the first or last layer of each self-attention block."""
    out = {}
    for arch, v in views.items():
        for block in dict.fromkeys(b for b, _ in v["spectra"]):
            layer = max(l for b, l in v["spectra"] if b == block) if depth == "last" else 0
            out[(arch, block)] = v["spectra"][(block, layer)][0].numpy()
    return out


# -- summaries: corpus statistics (computed on the page with its progress bar, kept here) --------------
def corpus_result(key: str):
    """A corpus statistic (head statistics, attribution agreement; key: corpus_jobs.result_key) from the memo, else
    from disk or its finished job (then kept in the memo for every session, lasting); None when not computed yet."""
    found = memo().peek(("corpus", key))
    if found is None:
        found = corpus_jobs.result(key)
        if found is not None:
            memo().put(("corpus", key), found, lasting=True)
    return found


@heavy
def report_html(path: str, stamp: float, text: str, heads: tuple) -> str:
    from viz_transformer.report import build_report
    return build_report(load_model(path, stamp), run_text(path, stamp, text), list(heads))
# -- per-head summaries of the sidebar run (every head of every layer: seconds on a large model) --------
@heavy
def head_tables(path: str, stamp: float, text: str):
    """The text's head statistics and sink shares per block (summaries.head_tables: one read of each pattern)."""
    run = run_text(path, stamp, text)
    with allocator.scratch():               # its thousands of pattern-sized temporaries reuse freed memory, not fresh pages
        return summaries.head_tables(run, workers=threads.cores())


def head_stats(path: str, stamp: float, text: str):
    return head_tables(path, stamp, text)[0]


def sink_shares(path: str, stamp: float, text: str, block: str):
    return head_tables(path, stamp, text)[1][block]


# -- logit lens and activation patching ---------------------------------------------------------------
@heavy
def lens(path: str, stamp: float, text: str, window: tuple[int, int]):
    """The lens summary (lenses.LensView) of the sidebar run: top tokens and P(final token) per cell,
    read out at the positions of `window` (a, b) only."""
    hm, run = load_model(path, stamp), run_text(path, stamp, text)
    return lenses.lens_view(hm, run, window=window)


@heavy
def trace_lens(path: str, stamp: float, text: str, step: int, settings: DecodeSettings = DecodeSettings()):
    """The lens of one decoding step of the trace `trace(path, stamp, text, settings)`: [rows, vocab]."""
    return lenses.trace_lens(load_model(path, stamp), trace(path, stamp, text, settings), step)


@heavy
def pair(path: str, stamp: float, text_a: str, text_b: str):
    return patching.prepare_pair(load_model(path, stamp), run_text(path, stamp, text_a).input, text_b)


def patching_scores(path: str, stamp: float, text_a: str, text_b: str, over: str, progress=None):
    """Memoized like @heavy; progress(done, total) is called while it computes (not part of the key)."""
    return memo().get(("patching_scores", (path, stamp, text_a, text_b, over), ()), lambda: patching.patching_scores(
        load_model(path, stamp), text_a, text_b, over, pair=pair(path, stamp, text_a, text_b), progress=progress))


@heavy
def parity(path: str, stamp: float):
    """run.parity.check on a float32 copy of the folder loaded for it alone (the pages' model may be bfloat16 or on
    a GPU, which transformers' float32 reference would call a difference); every session sees the one result."""
    from viz_transformer.run import parity as checker
    return checker.check(load_checkpoint(model_key.folder_of(path)))     # the folder alone: its own languages


@st.cache_resource(show_spinner=False, max_entries=8)
def sentence_pipeline(path: str, stamp: float):
    """A sentence encoder's pooling, Dense and Normalize modules (core.st_folder), read once per folder version (a
    Dense module's weights included), not on every rerun; a CheckpointError is raised again on each call."""
    from viz_transformer.core import st_folder
    return st_folder.sentence_pipeline(model_key.folder_of(path))
