"""What a user gives the command line, checked before any work: their mistakes (UserError: one line, status 2),
an --out path, a --text from argv, stdin's lines."""
from __future__ import annotations

import sys
from pathlib import Path


class UserError(Exception):
    """A mistake the user can fix: printed without a traceback."""


def load_model(path):
    """load_checkpoint, a checkpoint that does not load being a user's mistake (one line, status 2)."""
    from viz_transformer.run.capture import load_checkpoint
    from viz_transformer.core.checkpoint import CheckpointError
    try:
        return load_checkpoint(path)
    except CheckpointError as e:
        raise UserError(str(e)) from None


def out_path(path: str, suffixes: tuple[str, ...] = ()) -> Path:
    """--out checked before any work: its ending, and a folder that exists to write it in."""
    out = Path(path)
    if suffixes and out.suffix not in suffixes:
        raise UserError(f"--out must end in {' or '.join(suffixes)}, not {out.suffix or '(nothing)'}")
    if not out.parent.is_dir():
        raise UserError(f"--out {out}: the folder {out.parent} does not exist")
    return out


def clean_text(text: str) -> str:
    """argv holds undecodable bytes as lone surrogates: read them as U+FFFD, with a note."""
    clean = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if clean != text:
        print("note: the text is not valid UTF-8: undecodable bytes read as U+FFFD", file=sys.stderr)
    return clean


def stdin_lines():
    """stdin's lines as text, read as bytes with a cap: a line longer than the text limit is skipped
    (yielded as a ValueError) without holding it whole; invalid UTF-8 becomes U+FFFD, with a note."""
    from viz_transformer.core.encoding import MAX_CHARS
    cap = 4 * MAX_CHARS + 2                        # UTF-8 needs at most 4 bytes a character
    stream = sys.stdin.buffer
    n = 0
    while True:
        raw = stream.readline(cap)
        if not raw:
            return
        n += 1
        if not raw.endswith(b"\n") and len(raw) == cap:
            size = len(raw)
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(1 << 20)
                size += len(raw)
            size -= raw.endswith(b"\n")
            yield ValueError(f"the line has {size:,} bytes; the text limit is {MAX_CHARS:,} characters")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            print(f"note: line {n} is not valid UTF-8 ({e.reason} at byte {e.start}): undecodable bytes "
                  f"read as U+FFFD", file=sys.stderr)
            text = raw.decode("utf-8", "replace")
        yield text.rstrip("\r\n")
