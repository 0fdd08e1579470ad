"""A checkpoint's model and tokenizer together: run text, get every captured tensor back.

    hm = load_checkpoint("checkpoints/zh-en")
    run = hm.run("我是一名工程师。")          # run.cache["decoder.0.cross_attn.hook_pattern"]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import torch

from viz_transformer.core.config import ModelConfig
from viz_transformer.core.folders import open_folder
from viz_transformer.core.batch import Batch, forward, make_batch, one_row
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode_input, default_new_tokens, greedy_batch, greedy_outputs
from viz_transformer.run.logit_rules import allowed_logits, never_generated
from viz_transformer.run.derived_cache import lean_forward, lean_rows
from viz_transformer.run.lean_once import lean_run_once, reads_prompt_once
from viz_transformer.run.row_logits import RowLogits
from viz_transformer.run.trace import Trace
from viz_transformer.core.hooks import Cache, NamesFilter
from viz_transformer.core.encoding import ModelInput, check_decoding, encode_encoder, encode_input
from viz_transformer.core.model import Transformer
from viz_transformer.core.positional import sinusoidal_table
from viz_transformer.core.tokenizer import Tokenizer, encode_target, source_pieces


@dataclass(kw_only=True)
class Run:
    """One captured forward pass over a text and the output the model produced for it (or a given
    target), teacher-forced on exactly the ids that were generated: what the pages show is what
    the model computed."""
    text: str
    src_ids: Optional[list[int]]    # encoder input (text pieces + [end]); None for decoder-only
    src_pieces: Optional[list[str]]
    tgt_ids: list[int]              # decoder input: [begin] + output (translator), [begin] + prompt + output (LM)
    tgt_pieces: list[str]
    output: str                     # the output as text (display only)
    logits: torch.Tensor            # [tgt_pos, vocab] (an encoder-only model: [src_pos, vocab], its head's); a lean
                                    # LM run's is a RowLogits (run/row_logits.py): rows projected when read
    cache: Cache
    n_cut: int = 0                  # pieces of the text dropped to fit max_len ...
    cut_at: str = "end"             # ... at its "end" (translator) or its "start" (LM)
    prefix_len: Optional[int] = None
    output_ids: list[int] = field(default_factory=list)   # = tgt_ids[prompt_len:], never a final [end]
    prompt_len: int = 1             # decoder positions before the output: [begin] (+ the prompt for an LM)
    trace: Optional[Trace] = None   # the greedy trace that produced the output (None for a given target)
    predicted: list[str] = field(default_factory=list)   # per decoder row, the piece it predicts: argmax of its
                                    # logits without the never-generated ids, as greedy picks (analysis.query_labels)
    input: Optional[ModelInput] = None   # what the model read: the text encoded once
    predicted_ids: list[int] = field(default_factory=list)   # `predicted` as ids (a decoder's rows; [] for BERT)

    def batch(self) -> Batch:
        """The run's exact ids as a batch of one (source, [begin] + output or prompt + output, prefix; an
        encoder-only model's ids and segments)."""
        return one_row(self.src_ids, self.tgt_ids, self.prefix_len, self.segments)

    @property
    def segments(self) -> Optional[list[int]]:
        """An encoder-only model's segment id per src piece (0: sentence A, 1: B); None for other models."""
        return list(self.input.segments) if self.input is not None and self.input.segments is not None else None

    def pieces(self, part: str) -> list[str]:
        """Token labels for the query/key axes of an attention block in `part`."""
        return self.src_pieces if part == "encoder" else self.tgt_pieces


def _capture(model, batch: Batch, hooks, names_filter: NamesFilter, lean: bool):
    if lean:
        return lean_forward(model, batch, hooks, names_filter)
    return forward(model, batch, hooks, capture=True, names_filter=names_filter)


def _greedy_picks(logits: torch.Tensor, banned: list[int], rows: int = 256) -> list[int]:
    """Each row's argmax of logits [pos, vocab] without the never-generated ids, a few rows at a time: the masked
    copy of a long text's logits would be another [pos, vocab] (1.3 GB at 2,112 pieces of a 151,936-id vocabulary)."""
    return [i for part in logits.split(rows) for i in allowed_logits(part, banned).argmax(-1).tolist()]


class HookedModel:
    def __init__(self, model: Transformer, tokenizer: Tokenizer, path=None, meta: Optional[dict] = None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.path = Path(path) if path is not None else None
        self.meta = meta or {}

    @property
    def cfg(self) -> ModelConfig:
        return self.model.cfg

    @property
    def name(self) -> str:
        return self.path.name if self.path else "model"

    @property
    def hook_names(self) -> list[str]:
        return list(self.model.hook_names)

    @property
    def languages(self) -> Optional[tuple[str, str]]:
        """(source, target) language codes of a multilingual translator (mBART, M2M100, NLLB); None for others."""
        return getattr(self.tokenizer, "languages", None)

    def language_codes(self) -> list[str]:
        """The language codes this model's tokenizer holds, in id order ([] for a model without them)."""
        return list(getattr(self.tokenizer, "codes", {}) if self.languages is not None else [])

    def with_languages(self, src: str, tgt: str) -> "HookedModel":
        """This model reading `src` and writing `tgt`: a new HookedModel sharing the weights (never copied) with
        its own tokenizer settings, so one loaded model serves every user's choice and none changes another's.
        ValueError for a model without language codes, or a code it lacks."""
        if self.languages is None:
            raise ValueError(f"{self.name} has no language codes: only mBART, M2M100 and NLLB folders take them")
        return HookedModel(self.model, self.tokenizer.with_languages(src, tgt), self.path, self.meta)

    def translate(self, texts: list[str], max_new_tokens: Optional[int] = None) -> list[str]:
        return greedy_batch(self.model, self.tokenizer, texts, max_new_tokens=max_new_tokens)

    @torch.no_grad()
    def run(self, text: str, target: Optional[str] = None, names_filter: NamesFilter = None,
            max_new_tokens: Optional[int] = None, fwd_hooks=(), pair: Optional[str] = None, lean: bool = False,
            output_ids: Optional[Sequence[int]] = None) -> Run:
        """Capture one forward pass. The text becomes ids once; the model's greedy output is
        generated on those ids (or `target` is used), and the decoder is teacher-forced on
        [begin] + those very ids (+ the prompt before them, for an LM). fwd_hooks: (name, fn)
        pairs active for the generation and the capture of this call only. An encoder-only model
        (BERT) reads the text, or the sentence pair (text, pair) or "A [SEP] B", once, and generates
        nothing: its logits are the masked-LM head's at every piece. lean: scores and patterns are recomputed on
        read, never all held at once (derived_cache.lean_forward; for long texts), the same numbers; a one-sequence
        model's lean run reads its prompt once (run/lean_once.py: its output's positions equal to float rounding).
        output_ids: the output as ids (another run's `output_ids`), teacher-forced as they are: a second capture of
        the same run with other names, without generating again."""
        if self.cfg.is_encoder_only:
            return self._run_encoder(text, pair, names_filter, fwd_hooks, target, lean)
        if pair is not None:
            raise ValueError("a sentence pair is for encoder-only models (BERT); this model reads one text")
        tok, cfg, model = self.tokenizer, self.cfg, self.model
        max_new_tokens = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
        check_decoding(cfg, cfg.out_vocab, max_new_tokens)
        hooks = model.resolve_hooks(fwd_hooks)
        target_ids = None if target is None else encode_target(tok, target)      # "" = the prompt alone
        if output_ids is not None:
            target_ids = list(output_ids)
        reserve = max_new_tokens if target_ids is None else len(target_ids)
        inp = encode_input(tok, cfg, text, reserve=reserve)
        if lean and reads_prompt_once(model, target_ids, hooks):       # the prompt read once: capture, then generate
            trace, out_ids, rows, cache = lean_run_once(model, tok, inp, max_new_tokens, names_filter)
            logits = [rows]                                                   # as the batch of one below
        else:
            trace = None
            if target_ids is None:
                trace = decode_input(model, tok, inp, DecodeSettings(max_new_tokens=max_new_tokens), hooks=hooks)
                out_ids = trace.generated_ids
            else:
                out_ids = target_ids
            out_ids = out_ids[: max(0, cfg.max_len - len(inp.prompt))]     # a given target is cut at its end
            batch = make_batch(cfg, [inp], [out_ids])
            if lean and not cfg.is_encoder_decoder:                  # one sequence: no [T, vocab] logits held
                rows, cache = lean_rows(model, batch, hooks, names_filter, len(inp.prompt) - 1, never_generated(tok))
                logits = [rows]
            else:
                logits, cache = _capture(model, batch, hooks, names_filter, lean)
        tgt_ids = inp.decoder_ids(out_ids)
        src_ids = list(inp.src) if inp.src is not None else None
        picks = logits[0].predicted_ids if isinstance(logits[0], RowLogits) else _greedy_picks(logits[0],
                                                                                              never_generated(tok))
        predicted = tok.pieces(picks)
        return Run(text=text, src_ids=src_ids, src_pieces=source_pieces(tok, src_ids) if src_ids else None,
                   tgt_ids=tgt_ids, tgt_pieces=tok.pieces(tgt_ids), output=tok.decode(out_ids), logits=logits[0],
                   cache=cache, n_cut=inp.n_cut, cut_at=inp.cut_at, prefix_len=inp.prefix_len,
                   output_ids=list(out_ids), prompt_len=len(inp.prompt), trace=trace, predicted=predicted, input=inp,
                   predicted_ids=picks)

    def _run_encoder(self, text: str, pair: Optional[str], names_filter: NamesFilter, fwd_hooks, target,
                     lean: bool = False) -> Run:
        """HookedModel.run for an encoder-only model: the ids are the encoder's (src_ids); no decoder rows."""
        if target is not None:
            raise ValueError("an encoder-only model generates nothing, so it takes no target")
        tok, cfg, model = self.tokenizer, self.cfg, self.model
        inp = encode_encoder(tok, cfg, text, pair)
        logits, cache = _capture(model, make_batch(cfg, [inp]), model.resolve_hooks(fwd_hooks), names_filter, lean)
        src_ids = list(inp.src)
        predicted = tok.pieces(logits[0].argmax(-1).tolist())
        return Run(text=text, src_ids=src_ids, src_pieces=tok.pieces(src_ids), tgt_ids=[], tgt_pieces=[], output="",
                   logits=logits[0], cache=cache, n_cut=inp.n_cut, cut_at=inp.cut_at, prompt_len=0, predicted=predicted,
                   input=inp)

    def run_with_cache(self, text: str, target: Optional[str] = None, names_filter: NamesFilter = None):
        """(logits [tgt_pos, vocab], Cache) for a text: the two-line notebook entry point."""
        r = self.run(text, target, names_filter)
        return r.logits, r.cache

    def describe(self) -> dict:
        cfg = self.cfg
        return {"architecture": cfg.architecture, "encoder layers": cfg.n_encoder_layers,
                "decoder layers": cfg.n_decoder_layers, "heads": cfg.n_heads, "d_model": cfg.d_model,
                "d_head": cfg.d_head, "d_ff": cfg.d_ff, "activation": cfg.activation, "norm": cfg.norm,
                "positional": cfg.positional, "max_len": cfg.max_len, "vocab": cfg.vocab_size,
                "parameters": sum(p.numel() for p in self.model.parameters())}


# -- runs the pages need besides the main one --------------------------------------------------------
@dataclass
class PaddedBatch:
    """Two texts run together, right-padded: pieces per row and the captured masks."""
    src_pieces: Optional[list[list[str]]]   # per row, encoder input incl. [pad] (None for an LM)
    tgt_pieces: list[list[str]]              # per row, decoder input incl. [pad]
    cache: Cache                             # batch = 2
    padded_row: int                          # the row that got padding (the shorter text)


def most_different(hm: HookedModel, text: str, candidates: list[str]) -> str:
    """The candidate whose piece count differs most from the text's (so the batch gets padding)."""
    n = len(hm.tokenizer.encode(text))
    return max(candidates, key=lambda c: abs(len(hm.tokenizer.encode(c)) - n))


@torch.no_grad()
def run_padded(hm: HookedModel, texts: list[str], max_new_tokens: Optional[int] = None,
               names_filter: NamesFilter = None) -> tuple[Batch, Cache]:
    """Texts run together as one right-padded batch: (the batch, its capture). A translator's decoder
    input is [begin] + each text's own greedy output ids, as in `HookedModel.run`; a one-sequence model
    reads each text's prompt alone. names_filter: the captures to keep (default all)."""
    cfg, tok = hm.cfg, hm.tokenizer
    inputs = [encode_input(tok, cfg, t) for t in texts]
    n_new = default_new_tokens(cfg) if max_new_tokens is None else max_new_tokens
    check_decoding(cfg, cfg.out_vocab, n_new)
    outputs = None                               # where the text is the encoder's, the decoder reads the output
    if inputs[0].src is not None and not cfg.is_encoder_only:
        outputs = greedy_outputs(hm.model, inputs, n_new, never_generated(tok))
    batch = make_batch(cfg, inputs, outputs)
    _, cache = forward(hm.model, batch, capture=True, names_filter=names_filter)
    return batch, cache


def padded_batch(hm: HookedModel, text: str, other: str, max_new_tokens: Optional[int] = None,
                 names_filter: NamesFilter = None) -> PaddedBatch:
    """Run `text` and a second sentence as one right-padded batch so the padding mask shows (run_padded)."""
    tok = hm.tokenizer
    if hm.cfg.pad_id < 0:
        raise ValueError("this model has no padding token: its texts are never padded, so there is no padding mask")
    batch, cache = run_padded(hm, [text, other], max_new_tokens, names_filter)
    lengths = list(batch.src_len if batch.src is not None else batch.dec_len)
    short = int(lengths[1] < lengths[0]) if lengths[0] != lengths[1] else 1
    src_pieces = [source_pieces(tok, r.tolist()) for r in batch.src] if batch.src is not None else None
    return PaddedBatch(src_pieces, [tok.pieces(r.tolist()) for r in batch.dec], cache, short)


def positional_tables(hm: HookedModel, n: int) -> dict[str, Optional[torch.Tensor]]:
    """The first n rows of the sinusoidal table at this model's d_model, and of the model's own
    learned table when it has one, and its segment embeddings (BERT): {"sinusoidal": [n, d], "learned": [n, d] or
    None, "segments": [type_vocab_size, d] or None}."""
    cfg = hm.cfg
    n = min(n, cfg.max_len)
    learned = None
    if cfg.positional == "learned":
        off = cfg.pos_offset                # RoBERTa's table: its first rows (pad_id + 1) are never read
        learned = hm.model.dec_embed.pos.matrix()[off:off + n].detach().float().clone()
    segments = None                         # BERT's segment (token_type) embeddings: one row per sentence, A then B
    if cfg.type_vocab_size:
        segments = hm.model.enc_embed.W_type.weight.detach().float().clone()
    return {"sinusoidal": sinusoidal_table(n, cfg.d_model), "learned": learned, "segments": segments}


WEIGHT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
DEVICES = ("auto", "cpu", "cuda")


def pick_device(device: str = "auto") -> str:
    """"auto": a GPU when torch sees one, else the CPU; "cuda" without one: ValueError in one line."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but torch sees no GPU on this machine (use 'auto' or 'cpu')")
    return "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes the weights and buffers take, each tied tensor once."""
    seen, n = set(), 0
    for t in [*model.parameters(), *model.buffers()]:
        if id(t) not in seen:
            seen.add(id(t))
            n += t.numel() * t.element_size()
    return n


def load_checkpoint(path, dtype: str = "float32", device: str = "auto") -> HookedModel:
    """Load a checkpoint folder (no unpickling): ours (config.json, model.safetensors, tokenizer.model,
    meta.json), a Hugging Face model folder or a sentence-transformers folder, as core.folders opens it.
    Raises CheckpointError naming the bad file.
    dtype: "float32" (the default), or "bfloat16" (half the memory; about 3 significant digits);
    device: "auto" (a GPU when there is one), "cpu" or "cuda". Whatever they are, the library hands logits
    and captured tensors to analysis and plots as float32 on the CPU (Transformer.unembed, hooks.Cache)."""
    if dtype not in WEIGHT_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(WEIGHT_DTYPES)}, not {dtype!r}")
    where = pick_device(device)
    folder = open_folder(path)
    tok = folder.tokenizer()                      # before the weights: the cheaper file fails first
    model, meta = folder.model(), folder.meta
    model = model.to(device=where, dtype=WEIGHT_DTYPES[dtype])       # tied weights stay tied (same Parameter)
    model.host_outputs = True
    return HookedModel(model, tok, path, meta)
