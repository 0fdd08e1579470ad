"""Text -> ids, once: the checks on what a user may ask for, and the one truncation rule.

A translator's source keeps its first pieces (the end of a too-long text is dropped); a language
model's prompt keeps its last pieces, as every LM does, because those are what it continues.
Every limit lives here and raises ValueError naming the allowed range, before anything is allocated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

MAX_CHARS = 20_000        # text longer than this is refused before tokenizing
MAX_BEAM = 16             # beam_width: each beam holds its own KV cache
MAX_CANDIDATES = 50       # candidates recorded per decoding step
MAX_LENGTH_PENALTY = 5.0


@dataclass(frozen=True)
class ModelInput:
    """What the model reads for one text, decided once. The source feeds the encoder (an encoder-decoder
    only); the prompt is the decoder's input before any output: [begin] (encoder-decoder), [begin] +
    source pieces + [sep] (one-sequence translator), [begin] + prompt pieces (language model)."""
    src: Optional[tuple[int, ...]]   # encoder input: source pieces + [end]; None for one-sequence models
    prompt: tuple[int, ...]          # decoder positions before the output
    prefix_len: Optional[int]        # prefix LM: the positions every position may see (= len(prompt))
    n_cut: int = 0                   # pieces dropped to fit max_len
    cut_at: str = "end"              # "end": the end of the text was dropped (source); "start": its start (prompt)
    segments: Optional[tuple[int, ...]] = None   # an encoder-only model's segment id per src piece (0: A, 1: B)

    @property
    def ids(self) -> list[int]:
        """The text's own ids: the encoder input, or the prompt of a one-sequence model."""
        return list(self.src if self.src is not None else self.prompt)

    def with_ids(self, ids) -> "ModelInput":
        """The same input with the text's own ids replaced (e.g. its pieces permuted)."""
        ids = tuple(ids)
        if self.src is not None:
            return replace(self, src=ids)
        return replace(self, prompt=ids, prefix_len=len(ids) if self.prefix_len is not None else None)

    def decoder_ids(self, output=()) -> list[int]:
        """The decoder's input for an output: the prompt, then the output ids."""
        return list(self.prompt) + list(output)

    def notice(self, max_len: int) -> str:
        """One line saying what was cut ("" when nothing was)."""
        if not self.n_cut:
            return ""
        where = "last" if self.cut_at == "end" else "first"
        return (f"the text is longer than this model's {max_len} positions: its {where} {self.n_cut} "
                f"piece{'s' * (self.n_cut != 1)} {'were' if self.n_cut != 1 else 'was'} left out")


def require_text(text) -> str:
    if not isinstance(text, str):
        raise ValueError(f"the text must be a string, not {type(text).__name__}")
    if not text.strip():
        raise ValueError("the text is empty: type a sentence first")
    if len(text) > MAX_CHARS:
        raise ValueError(f"the text has {len(text):,} characters; the limit is {MAX_CHARS:,}")
    if any("\ud800" <= c <= "\udfff" for c in text):      # not characters: SentencePiece cannot take them
        raise ValueError("the text holds lone surrogates (U+D800 to U+DFFF), which are not characters")
    return text


def source_end(tok, cfg) -> tuple[int, ...]:
    """The ids an encoder's source ends with, after its text: [end]; a language tokenizer's (mBART: </s> and the
    source's language code)."""
    return tuple(getattr(tok, "source_end", (cfg.eos_id,)))


def decoder_start(tok, cfg) -> tuple[int, ...]:
    """An encoder-decoder's prompt: [begin] (an imported model's decoder_start_token_id), then the id generate()
    forces first (forced_bos_token_id: BART's <s>); a language tokenizer's own (the target language's code)."""
    start = getattr(tok, "decoder_start", None)
    if start:
        return tuple(start)
    return (cfg.bos_id,) + ((cfg.forced_bos_id,) if cfg.forced_bos_id >= 0 else ())


def _text_ids(tok, cfg, text: str) -> list[int]:
    """The text's pieces as the model input takes them (an encoder's source without the end an imported
    tokenizer puts on, [end] or a language tokenizer's source_end: encode_source puts it back last)."""
    ids = tok.encode(require_text(text))
    end = list(source_end(tok, cfg))
    if cfg.is_encoder_decoder and not cfg.prepend_bos and ids[-len(end):] == end:
        ids = ids[:-len(end)]
    return ids


def left_out(tok, cfg, text: str, inp: ModelInput) -> str:
    """The part of `text` the model does not read, as text ("" when nothing was cut): its end for a
    source, its start for a language model's prompt."""
    if not inp.n_cut:
        return ""
    ids = _text_ids(tok, cfg, text)
    gone = tok.decode(ids[len(ids) - inp.n_cut:] if inp.cut_at == "end" else ids[:inp.n_cut])
    return gone.strip().strip("\ufffd")                       # a character cut between its bytes: not shown


def encode_source(tok, cfg, text: str) -> ModelInput:
    """Encoder-decoder: the source's first max_len - 1 pieces + [end] (as in training; a language tokenizer's
    code stays first, or after the [end]); prompt [begin] (an imported model's decoder start token, and the id it
    forces first: decoder_start)."""
    ids, end = _text_ids(tok, cfg, text), source_end(tok, cfg)
    room = cfg.max_len - len(end)
    return ModelInput(tuple(ids[:room]) + end, decoder_start(tok, cfg), None, max(0, len(ids) - room), "end")


def encode_prompt(tok, cfg, text: str, reserve: int = 0) -> ModelInput:
    """One sequence, leaving `reserve` positions free (for the tokens to generate, or a target), at least
    one piece kept. A translator ([sep] in its vocabulary): [begin] + the source's first pieces + [sep];
    a language model: [begin] + the text's last pieces, which are what it continues."""
    ids = _text_ids(tok, cfg, text)
    if cfg.sep_id >= 0:
        room = max(1, cfg.max_len - 2 - reserve)
        prompt, cut_at = (cfg.bos_id, *ids[:room], cfg.sep_id), "end"
    else:
        begin = (cfg.bos_id,) if cfg.prepend_bos else ()        # an imported tokenizer adds its own specials
        room = max(1, cfg.max_len - len(begin) - reserve)
        prompt, cut_at = (*begin, *ids[-room:]), "start"
    prefix_len = len(prompt) if cfg.architecture == "prefix_lm" else None
    return ModelInput(None, prompt, prefix_len, max(0, len(ids) - room), cut_at)


def encode_encoder(tok, cfg, text: str, pair: Optional[str] = None) -> ModelInput:
    """Encoder-only (BERT): the text, or the sentence pair (text, pair), or "A [SEP] B" typed as one text,
    with the special tokens and segment ids the tokenizer's post-processor gives; a text too long keeps its
    first max_len - 1 pieces and its final [SEP]. No decoder, so the prompt is empty."""
    require_text(text)
    if pair is None and hasattr(tok, "split_pair"):
        text, pair = tok.split_pair(text)
    elif pair is not None:
        require_text(pair)
    if hasattr(tok, "encode_pair"):
        ids, segments = tok.encode_pair(text, pair)
    else:
        if pair is not None:
            raise ValueError("this model's tokenizer does not build sentence pairs")
        ids = tok.encode(text)
        segments = [0] * len(ids)
    cut = max(0, len(ids) - cfg.max_len)
    if cut:
        ids, segments = ids[:cfg.max_len - 1] + ids[-1:], segments[:cfg.max_len - 1] + segments[-1:]
    return ModelInput(tuple(ids), (), None, cut, "end", tuple(segments))


def encode_input(tok, cfg, text: str, reserve: int = 0) -> ModelInput:
    """The model input for a text: the one truncation rule of each kind of model."""
    if cfg.is_encoder_only:
        return encode_encoder(tok, cfg, text)
    return encode_source(tok, cfg, text) if cfg.is_encoder_decoder else encode_prompt(tok, cfg, text, reserve)


def as_input(tok, cfg, text, reserve: int = 0) -> ModelInput:
    """A text encoded (encode_input); a ModelInput, e.g. a run's `run.input`, is taken as it is, never
    encoded again."""
    return text if isinstance(text, ModelInput) else encode_input(tok, cfg, text, reserve)


# -- decoding parameters --------------------------------------------------------------------------
def _int(name: str, v, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, not {v!r}")
    return v


def _float(name: str, v, ok, allowed: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
        raise ValueError(f"{name} must be {allowed}, not {v!r}")
    return float(v)


def check_decoding(cfg, vocab_size: int, max_new_tokens: int, temperature: float = 1.0, top_k: int = 0,
                   top_p: float = 1.0, beam_width: int = 4, length_penalty: float = 1.0,
                   n_candidates: int = 5, seed: int = 0) -> None:
    """Refuse out-of-range decoding parameters with a message that names the allowed range."""
    _int("max_new_tokens", max_new_tokens, 1, cfg.max_len)
    _float("temperature", temperature, lambda x: x > 0, "greater than 0 (use greedy for the most likely token)")
    _int("top_k", top_k, 0, vocab_size)
    _float("top_p", top_p, lambda x: 0 < x <= 1, "in (0, 1]")
    _int("beam_width", beam_width, 1, MAX_BEAM)
    _float("length_penalty", length_penalty, lambda x: abs(x) <= MAX_LENGTH_PENALTY,
           f"between -{MAX_LENGTH_PENALTY:g} and {MAX_LENGTH_PENALTY:g}")
    _int("n_candidates", n_candidates, 1, MAX_CANDIDATES)
    _int("seed", seed, 0, 2**63 - 1)
