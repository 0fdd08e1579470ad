"""Byte-level BPE tokens (GPT-2, Qwen, Llama 3) and SentencePiece byte-fallback pieces (<0xF0>) as pieces a
person can read: bytes back from GPT-2's bytes→unicode table or from the <0xNN> piece, one label per token,
and the tokens grouped so every group is whole characters.

A byte-level token is a string over 256 stand-in characters, one per byte ("Ġthe" is b" the"); a Chinese
character is 3 UTF-8 bytes and often ends up split over 2–3 tokens, each of which alone decodes to "�".
Pure Python, no tokenizer library needed.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Optional

WORD_START = "\u2581"      # ▁, as SentencePiece pieces show a space (core.tokenizer.WORD_START)
ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: the printable bytes !..~, ¡..¬, ®..ÿ stand for themselves; the other 68 bytes, in
    increasing order, stand for chr(256), chr(257), … (so no token holds a space or a control character)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + n)
            n += 1
    return table


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def bytes_of_token(token: str) -> bytes:
    """The bytes a byte-level token stands for: "Ġthe" -> b" the", "æĪ" -> b"\\xe6\\x88". A token with a
    character outside the table (an added special token such as "<|im_start|>" is inside it; one written
    with real spaces or CJK is not) raises ValueError naming that character."""
    try:
        return bytes(CHAR_TO_BYTE[c] for c in token)
    except KeyError as e:
        raise ValueError(f"{token!r} is not a byte-level BPE token: {e.args[0]!r} is not in GPT-2's "
                         f"bytes→unicode table") from None


def _token_bytes(token: str) -> Optional[bytes]:
    """bytes_of_token, or None for a token that is not byte-level (shown as it is, its own group)."""
    try:
        return bytes_of_token(token)
    except ValueError:
        return None


def sentencepiece_bytes(piece: str) -> Optional[bytes]:
    """The byte a SentencePiece byte-fallback piece stands for ("<0xF0>" -> b"\\xf0"); None for any other piece
    (shown as it is, its own group). Passed to readable_pieces and group_fragments as `to_bytes`."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return bytes([int(piece[3:5], 16)])
        except ValueError:
            return None
    return None


FRAGMENT = re.compile(r"(\\[xu][0-9a-f]+|.)\((\d+)/(\d+)\)")   # 我(1/2): one of n tokens that spell 我


def continues_character(label: str) -> bool:
    """A label that starts with the 2nd, 3rd, … fragment of a character ("我(2/2)", "🍎(3/4)"): it belongs to
    the word of the label before it."""
    m = FRAGMENT.match(label)
    return bool(m) and m.group(2) != "1"


def without_fragment_marks(text: str) -> str:
    """Labels joined into one word, each split character written once: "🍎(1/4)🍎(2/4)🍎(3/4)🍎(4/4)" -> "🍎"
    (a word that starts inside a character keeps that character)."""
    return FRAGMENT.sub(lambda m: m.group(1) if m.group(2) == "1" or m.start() == 0 else "", text)


def _char_length(lead: int) -> int:
    """The UTF-8 length a lead byte announces; 0 for a byte that cannot start a character."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _units(stream: bytes) -> list[tuple[int, int, Optional[str]]]:
    """Cut a byte stream into (start, end, character), or (start, start + 1, None) for a byte that is not
    part of a valid character (a stray continuation byte, or a character cut off at the end)."""
    out, i = [], 0
    while i < len(stream):
        n = _char_length(stream[i])
        chunk = stream[i:i + n] if n else b""
        try:
            ch = chunk.decode("utf-8") if len(chunk) == n and n else None
        except UnicodeDecodeError:          # bad continuation, overlong, surrogate
            ch = None
        if ch is None:
            out.append((i, i + 1, None))
            i += 1
        else:
            out.append((i, i + n, ch))
            i += n
    return out


def _show(ch: str) -> str:
    """One character as a label shows it: a space as ▁, control and invisible format characters escaped."""
    if ch == " ":
        return WORD_START
    if ch in ESCAPES:
        return ESCAPES[ch]
    cat = unicodedata.category(ch)
    if cat == "Cc":
        return f"\\x{ord(ch):02x}"
    if cat in ("Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
        return f"\\u{ord(ch):04x}"
    return ch


def _runs(tokens: list[str], to_bytes=_token_bytes) -> list[tuple[list[int], list[bytes]]]:
    """Consecutive byte-level tokens, broken by tokens that are not byte-level (each alone, bytes None)."""
    runs: list[tuple[list[int], list[Optional[bytes]]]] = []
    current: tuple[list[int], list[bytes]] = ([], [])
    for i, tok in enumerate(tokens):
        b = to_bytes(tok)
        if b is None:
            if current[0]:
                runs.append(current)
                current = ([], [])
            runs.append(([i], [None]))
        else:
            current[0].append(i)
            current[1].append(b)
    if current[0]:
        runs.append(current)
    return runs


def _run_units(parts: list[bytes]) -> list[tuple[list[int], Optional[str], bytes]]:
    """The units of a run's byte stream, each with the run-local indices of the tokens that hold its bytes."""
    owner = [k for k, b in enumerate(parts) for _ in b]
    stream = b"".join(parts)
    return [(sorted(set(owner[a:e])), ch, stream[a:e]) for a, e, ch in _units(stream)]


def readable_pieces(tokens: list[str], to_bytes=_token_bytes) -> list[str]:
    """One label per byte-level token, its text as a person reads it. `to_bytes` reads a token's bytes (None:
    not a byte token, shown as it is): GPT-2's table by default, sentencepiece_bytes for SentencePiece, whose
    byte-fallback pieces <0xF0> <0x9F> <0x8D> <0x8E> become 🍎(1/4) … 🍎(4/4) as a byte-level BPE's would.

    - spaces show as ▁, as SentencePiece pieces do, so "Ġthe" is "▁the" and core.tokenizer.group_words
      starts a word there; a newline shows as the two characters \\n (also \\t, \\r), other control
      characters as \\xNN, invisible format characters (zero-width joiner, …) as \\uNNNN;
    - a character whose bytes are split over several tokens is written on every one of them, with
      which part of how many tokens that is: 我 split over two tokens labels them "我(1/2)" and "我(2/2)".
      Why this and not "…" on the first fragment and 我 on the last: on a heatmap axis each row or column
      is read on its own, and a bare "…" does not say which character it belongs to; with the character on
      every fragment, attention to either part is visibly attention to 我, and the fraction says the
      token is only a part (its bytes alone decode to no character, never "�");
    - a token may end one character and start the next: "我(2/2)是(1/3)";
    - a byte that is no part of a valid character (a stray continuation byte, e.g. when a long prompt was cut
      inside a character, or a character cut off at the end) shows as <0xNN>, as SentencePiece's byte pieces;
    - a token that is not byte-level (a special token written with characters outside the table) is shown
      as it is.
    Labels may repeat (the app names rows and columns "i:piece", so they need not be unique)."""
    labels = [""] * len(tokens)
    for idx, parts in _runs(tokens, to_bytes):
        if parts == [None]:
            labels[idx[0]] = tokens[idx[0]]
            continue
        for owners, ch, raw in _run_units(parts):
            if ch is None:
                labels[idx[owners[0]]] += "".join(f"<0x{b:02X}>" for b in raw)
            elif len(owners) == 1:
                labels[idx[owners[0]]] += _show(ch)
            else:
                for part, k in enumerate(owners, 1):
                    labels[idx[k]] += f"{_show(ch)}({part}/{len(owners)})"
    return labels


def group_fragments(tokens: list[str], to_bytes=_token_bytes) -> list[list[int]]:
    """Token indices grouped so that each group's bytes decode to whole characters: a token is its own
    group unless a character is split across it and its neighbours, then they share one group
    (["æĪ", "ĳ", "æĺ¯"] -> [[0, 1], [2]]). A token that is not byte-level is a group of its own; bytes
    that form no valid character stay in the group of the token holding them."""
    groups: list[list[int]] = []
    for idx, parts in _runs(tokens, to_bytes):
        if parts == [None]:
            groups.append(idx)
            continue
        run_groups: list[list[int]] = []
        for owners, _, _ in _run_units(parts):
            if run_groups and owners[0] <= run_groups[-1][-1]:   # shares a token with the group before
                run_groups[-1].extend(k for k in owners if k > run_groups[-1][-1])
            else:
                run_groups.append(list(owners))
        covered = {k for g in run_groups for k in g}
        for k in range(len(parts)):            # an empty token (no bytes) is its own group, in order
            if k not in covered:
                run_groups.append([k])
        run_groups.sort(key=lambda g: g[0])
        groups.extend([idx[k] for k in g] for g in run_groups)
    return groups
