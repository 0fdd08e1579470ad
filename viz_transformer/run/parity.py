"""Does this folder compute here what it computes in transformers? Five fixed texts run through our model and
through transformers' own (eager attention, float32), the same ids given to both; the worst difference in
logits (or, for a model without an output head, the last hidden states) and in attention patterns, whether the
top token agrees at every position, and whether transformers' own tokenizer gives the same ids.

    report = check(load_checkpoint("my-folder"))
    report.ok, report.worst_logits, report.worst_pattern      # True, 3e-6, 4e-7

transformers is imported here only, on first use: without it, MissingTransformers says how to install it.
Peers that re-implement Hugging Face models diverge silently (a different argmax than plain transformers); this
check is how a user of this project knows which case a folder is in.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from viz_transformer.core.hook_names import layer_name

TEXTS = ("The doctor told me to rest at home.", "我是一名工程师。", "Once upon a time there was a little cat.",
         "I love you. 我爱你。", "Beijing 北京 is a big city, 人口很多。")
LOGITS_TOL, PATTERN_TOL = 1e-3, 1e-4        # float32 on different kernels: far above rounding, far below a bug
LARGE = 1_000_000_000                       # parameters past which a page asks before running the check
INSTALL = "pip install transformers==5.23.0"


class MissingTransformers(RuntimeError):
    """transformers is not installed: the check cannot run (its message is one line saying how to install it)."""


@dataclass
class TextResult:
    text: str
    logits: float                  # max |ours − theirs| over the logits (or last hidden states)
    pattern: float                 # max |ours − theirs| over every head's attention pattern
    top_agrees: Optional[bool]     # argmax equal at every position (None: no output head, nothing to pick)
    ids_agree: Optional[bool]      # transformers' tokenizer gives our ids (None: it could not be loaded)


@dataclass
class ParityReport:
    family: str                    # config.json's model_type
    compared: str                  # "logits" or "hidden states"
    results: list[TextResult] = field(default_factory=list)
    seconds: float = 0.0
    version: str = ""              # transformers' version

    @property
    def worst_logits(self) -> float:
        return max(r.logits for r in self.results)

    @property
    def worst_pattern(self) -> float:
        return max(r.pattern for r in self.results)

    @property
    def ok(self) -> bool:
        return (self.worst_logits <= LOGITS_TOL and self.worst_pattern <= PATTERN_TOL
                and all(r.top_agrees is not False and r.ids_agree is not False for r in self.results))


def n_params(hm) -> int:
    return sum(p.numel() for p in hm.model.parameters())


def estimate_seconds(hm) -> float:
    """A rough time for the check on two CPU cores: transformers reading the weights a second time (about
    0.25 GB/s, as measured on a BERT-base-sized folder, where it dominates) and ten forwards over about 20
    positions at about 20 GFLOP/s (2 · parameters per position)."""
    p = n_params(hm)
    return 4 * p / 0.25e9 + 10 * 2 * p * 20 / 20e9


def _transformers():
    try:
        import transformers
    except ImportError:
        raise MissingTransformers(f"the check runs the folder in transformers, which is not installed: {INSTALL}") \
            from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


def _load(tf, hm):
    cfg, folder = hm.cfg, str(_files(hm))
    auto = (tf.AutoModelForSeq2SeqLM if cfg.is_encoder_decoder else
            (tf.AutoModelForMaskedLM if cfg.head == "mlm" else tf.AutoModel) if cfg.is_encoder_only else
            tf.AutoModelForCausalLM)
    return auto.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()


def _files(hm):
    from viz_transformer.core.folders import open_folder
    return open_folder(hm.path).files


def _tokenizer(tf, hm):
    try:
        return tf.AutoTokenizer.from_pretrained(str(_files(hm)))
    except Exception:                    # a family whose tokenizer transformers cannot build here: ids not compared
        return None


def _ours_patterns(run, cfg) -> dict[str, list[torch.Tensor]]:
    """Our patterns in transformers' output order: {output name: [heads, q, k] per layer}."""
    def stack(part, attn, n):
        return [run.cache[layer_name(part, i, f"{attn}.hook_pattern")][0] for i in range(n)]
    if cfg.is_encoder_decoder:
        return {"encoder_attentions": stack("encoder", "self_attn", cfg.n_encoder_layers),
                "decoder_attentions": stack("decoder", "self_attn", cfg.n_decoder_layers),
                "cross_attentions": stack("decoder", "cross_attn", cfg.n_decoder_layers)}
    part, n = ("encoder", cfg.n_encoder_layers) if cfg.is_encoder_only else ("decoder", cfg.n_decoder_layers)
    return {"attentions": stack(part, "self_attn", n)}


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if tuple(a.shape) != tuple(b.shape):
        return float("inf")
    return float((a.float() - b.float()).abs().max())


@torch.no_grad()
def check_text(hm, model, tok, text: str) -> TextResult:
    cfg = hm.cfg
    # nothing generated: a one-sequence model reads the text alone, an encoder-decoder's decoder is teacher-forced
    # on the text itself (any ids do; these are in the target vocabulary's pieces)
    last = layer_name("encoder", cfg.n_encoder_layers - 1, "hook_resid_post")
    keep = lambda name: name.endswith("hook_pattern") or name == last            # noqa: E731  (all it compares)
    run = hm.run(text, names_filter=keep) if cfg.is_encoder_only else \
        hm.run(text, target=text if cfg.is_encoder_decoder else "", names_filter=keep)
    if cfg.is_encoder_decoder:
        out = model(input_ids=torch.tensor([run.src_ids]), decoder_input_ids=torch.tensor([run.tgt_ids]),
                    output_attentions=True)
        ours_ids = run.src_ids
    elif cfg.is_encoder_only:
        takes_types = "token_type_ids" in inspect.signature(model.forward).parameters     # DistilBERT's does not
        kw = {"token_type_ids": torch.tensor([run.segments])} if takes_types and run.segments else {}
        out = model(input_ids=torch.tensor([run.src_ids]), output_attentions=True, output_hidden_states=True, **kw)
        ours_ids = run.src_ids
    else:
        out = model(input_ids=torch.tensor([run.tgt_ids]), output_attentions=True)
        ours_ids = run.tgt_ids[: run.prompt_len]
    if cfg.is_encoder_only and cfg.head != "mlm":
        ours, theirs = run.cache[last][0], out.last_hidden_state[0]
    else:
        ours, theirs = run.logits, out.logits[0]
    ours, theirs = ours[: theirs.shape[0]], theirs[: ours.shape[0]]
    pattern = max((_diff(a, b[0]) for name, mine in _ours_patterns(run, cfg).items()
                   for a, b in zip(mine, getattr(out, name) or ())), default=float("inf"))
    top = None if cfg.is_encoder_only and cfg.head != "mlm" else \
        tuple(ours.shape) == tuple(theirs.shape) and bool((ours.argmax(-1) == theirs.argmax(-1)).all())
    ids = None if tok is None else list(tok(text).input_ids) == list(ours_ids)
    return TextResult(text, _diff(ours, theirs), pattern, top, ids)


def check(hm, texts=TEXTS, progress: Optional[Callable[[int, int], None]] = None) -> ParityReport:
    """The folder of `hm` (a Hugging Face or sentence-transformers folder) run in transformers on `texts`.
    ValueError for a folder transformers cannot open (ours, say); MissingTransformers without transformers."""
    meta = hm.meta or {}
    if meta.get("source") != "Hugging Face" or hm.path is None:
        raise ValueError("the check compares a Hugging Face folder with transformers; this model is not one "
                         "(this project's own checkpoints have no transformers implementation)")
    tf = _transformers()
    start = time.perf_counter()
    model, tok = _load(tf, hm), _tokenizer(tf, hm)
    compared = "hidden states" if hm.cfg.is_encoder_only and hm.cfg.head != "mlm" else "logits"
    report = ParityReport(str(meta.get("model_type", "")), compared, version=tf.__version__)
    for i, text in enumerate(texts):
        report.results.append(check_text(hm, model, tok, text))
        if progress:
            progress(i + 1, len(texts))
    report.seconds = time.perf_counter() - start
    return report


def summary(report: ParityReport) -> str:
    """One English line: the verdict and its numbers (the CLI prints it; pages word it in their language)."""
    verdict = "matches transformers" if report.ok else "differs from transformers"
    ids, tops = [r.ids_agree for r in report.results], [r.top_agrees for r in report.results]
    tok = "ids equal" if all(ids) else "ids differ" if False in ids else "ids not compared"
    top = ("no output head" if None in tops else "top token agrees everywhere" if all(tops)
           else "top token differs somewhere")
    return (f"{verdict} {report.version} on {len(report.results)} texts: worst {report.compared} difference "
            f"{report.worst_logits:.1e}, worst attention difference {report.worst_pattern:.1e}, {top}, {tok} "
            f"({report.seconds:.1f} s)")
