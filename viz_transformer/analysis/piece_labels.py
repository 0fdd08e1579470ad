"""Labels of what the pages show: the pieces on each axis of a block's pattern, a decoder row's
"input → predicted" label, the pieces table, and what kind of tokenizer cut the text. Lists of strings in, lists
of strings out; no torch."""
from __future__ import annotations

from typing import Optional

from viz_transformer.core.byte_pieces import sentencepiece_bytes
from viz_transformer.core.tokenizer import EOS, WORD_START, group_words, is_cjk, word_labels


def block_pieces(run, block: str) -> tuple[list[str], list[str]]:
    """(query pieces, key pieces) of a block: cross-attention queries the decoder, keys the source."""
    if block == "encoder.self_attn":
        return run.src_pieces, run.src_pieces
    if block == "decoder.cross_attn":
        return run.tgt_pieces, run.src_pieces
    return run.tgt_pieces, run.tgt_pieces


ARROW = " → "       # a decoder row's label: its input, then the token predicted there


def query_labels(run, block: str, words: bool = False) -> list[str]:
    """Labels of a block's query rows, for display. An encoder row is its piece. A decoder row (self- or
    cross-attention) is the step that predicts the next token: "▁an → ▁engineer" is the row whose input is ▁an
    and where the model predicts ▁engineer (run.predicted). words: one label per word (word_level's rows)."""
    q, _ = block_pieces(run, block)
    return row_labels(q, None if block == "encoder.self_attn" else run.predicted, words)


def row_labels(pieces: list[str], predicted: Optional[list[str]] = None, words: bool = False) -> list[str]:
    """"input → predicted" per row (the pieces alone when predicted is None). With words, a word's row says
    what its last piece predicts, the step at the end of the word."""
    groups = group_words(pieces) if words else [[i] for i in range(len(pieces))]
    names = word_labels(pieces, groups) if words else list(pieces)
    if predicted is None:
        return names
    return [f"{n}{ARROW}{predicted[g[-1]]}" for n, g in zip(names, groups)]


def next_pieces(pieces: list[str]) -> list[str]:
    """What each teacher-forced decoder row is trained to predict: the next piece, [end] after the last."""
    return list(pieces[1:]) + [EOS]


def example_row(pieces: list[str], predicted: list[str], start: int = 0) -> tuple[str, str]:
    """(row label, predicted piece) of one row from `start` on, for a page's intro: the one predicting the
    longest word ("▁an → ▁engineer")."""
    start = min(max(start, 0), len(pieces) - 1)
    i = max(range(start, len(pieces)), key=lambda r: (predicted[r].lstrip("\u2581").isalpha(), len(predicted[r]), -r))
    return f"{pieces[i]}{ARROW}{predicted[i]}", predicted[i]


def position_labels(pieces: list[str]) -> list[str]:
    """Unique labels "i:piece", so a repeated token stays a separate row/column."""
    return [f"{i}:{p}" for i, p in enumerate(pieces)]


def pieces_table(ids: list[int], pieces: list[str]) -> list[dict]:
    """One row per piece: position, piece, id, word index (tokenizer.group_words), starts a word."""
    word_of = {i: w for w, g in enumerate(group_words(pieces)) for i in g}
    return [{"pos": i, "piece": p, "id": int(ids[i]), "word": word_of[i], "starts": p.startswith("\u2581")}
            for i, p in enumerate(pieces)]


def bare_word_marks(pieces: list[str]) -> list[int]:
    """Positions of a piece that is SentencePiece's word-start mark ▁ alone, before a CJK character: the
    vocabulary has no piece that joins the mark to that character, so the mark (a space, or where the text
    began) takes a position of its own and spells nothing a reader sees."""
    return [i for i, p in enumerate(pieces)
            if p == WORD_START and i + 1 < len(pieces) and pieces[i + 1][:1] and is_cjk(pieces[i + 1][0])]


def byte_read_characters(raw: list[str]) -> list[tuple[str, int]]:
    """(character, byte pieces) for each character that SentencePiece pieces `raw` spell with byte-fallback pieces
    (<0xE9> <0xA5> <0xBA> for 饺, <0x3C> for <), in order, each occurrence once: for a model with byte fallback, a
    character its vocabulary lacks."""
    out, run = [], b""
    for p in list(raw) + [""]:
        b = sentencepiece_bytes(p) if p else None
        if b is not None:
            run += b
            continue
        text = run.decode("utf-8", errors="replace")
        out += [(ch, len(ch.encode("utf-8"))) for ch in text]
        run = b""
    return out


def tokenizer_kind(tok) -> str:
    """What cuts a text into pieces: "sentencepiece" (this project's models, Marian), "byte_bpe" (GPT-2,
    Qwen), "bpe" (Llama, Mistral: BPE over characters), "wordpiece"; a tokenizer without `kind` is ours."""
    return getattr(tok, "kind", "sentencepiece")


def find_piece(pieces: list[str], query: str) -> Optional[int]:
    """The piece where `query` first begins in the text the pieces spell (case-insensitive; the space markers ▁
    and Ġ read as spaces, so a search may span pieces), or None; an empty query finds nothing."""
    query = query.strip().lower()
    if not query:
        return None
    text, owner = "", []
    for i, p in enumerate(pieces):
        s = p.replace("▁", " ").replace("Ġ", " ").lower()
        text += s
        owner += [i] * len(s)
    at = text.find(query)
    if at < 0:                                   # a query typed with spaces the pieces do not show
        at = text.replace(" ", "").find(query.replace(" ", ""))
        owner = [i for i, ch in zip(owner, text) if ch != " "]
    return owner[at] if at >= 0 else None
