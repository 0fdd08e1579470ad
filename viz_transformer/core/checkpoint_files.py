"""A checkpoint folder's files read without torch: their names and limits, the folder's checks, the JSON files,
the config as written and the tokenizer. core/checkpoint.py (weights, saving) and core/catalog.py build on it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from viz_transformer.core.config import ModelConfig
from viz_transformer.core.tokenizer import Tokenizer

CONFIG, WEIGHTS, TOKENIZER, META = "config.json", "model.safetensors", "tokenizer.model", "meta.json"
FILES = (CONFIG, WEIGHTS, TOKENIZER, META)
DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "checkpoints"
MAX_JSON_BYTES = 1 << 20          # config.json and meta.json are a few hundred bytes
MAX_TOKENIZER_BYTES = 64 << 20    # a 256k-piece SentencePiece model is about 5 MB


class CheckpointError(ValueError):
    """A checkpoint folder or one of its files is missing, corrupt or inconsistent."""


def pickle_note(path: Path) -> str:
    """' (it is a Python pickle ...)' when the file starts like one; loading never unpickles."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return ""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return " (it is a Python pickle: pickles can run code and are never loaded)"
    if head.startswith(b"PK\x03\x04"):
        return " (it is a zip archive, as torch.save writes, which holds a pickle: never loaded)"
    return ""


def inside(path: Path, base: Path) -> bool:
    """`path`, its links followed, is `base` (already resolved) or lies under it."""
    return path.resolve() == base or base in path.resolve().parents


def read_json(folder: Path, name: str) -> dict:
    path = folder / name
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(f"{path} has {path.stat().st_size:,} bytes; the limit is {MAX_JSON_BYTES:,}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}){pickle_note(path)}") from None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path} is not UTF-8 text{pickle_note(path)}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return data


def check_folder(folder, root=None) -> Path:
    """The folder exists, holds the four files as regular files, and neither it (under `root`) nor
    any of its files is a link pointing outside it: a checkpoint can only be what is in its folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint folder {folder} does not exist")
    if root is not None and not inside(folder, Path(root).resolve()):
        raise CheckpointError(f"{folder} is a link to {folder.resolve()}, outside {root}: refused")
    base = folder.resolve()
    for f in FILES:
        p = folder / f
        if (p.is_symlink() or p.exists()) and not inside(p, base):
            raise CheckpointError(f"{p} is a link to {p.resolve()}, outside its checkpoint folder: refused")
    missing = [f for f in FILES if not (folder / f).is_file()]
    if missing:
        raise CheckpointError(f"{folder} is missing {', '.join(missing)}")
    return folder


def read_config_json(folder) -> ModelConfig:
    """The folder's config.json as a ModelConfig, checked field by field (checkpoint.read_config also checks
    the size of the model it describes, which needs torch)."""
    folder = check_folder(folder)
    try:
        return ModelConfig.from_dict(read_json(folder, CONFIG))
    except (TypeError, ValueError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"{folder / CONFIG}: {e}") from None


def read_meta(folder) -> dict:
    return read_json(Path(folder), META)


def update_meta(folder, **blocks) -> dict:
    """Set these keys of the folder's meta.json (a missing file starts empty), keeping everything else;
    returns the whole new meta."""
    path = Path(folder) / META
    meta = {**(read_meta(folder) if path.exists() else {}), **blocks}
    path.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return meta


def check_tokenizer_file(folder) -> Path:
    """Cheap checks of tokenizer.model before SentencePiece parses it: its size, and not a pickle."""
    path = Path(folder) / TOKENIZER
    if path.stat().st_size > MAX_TOKENIZER_BYTES:
        raise CheckpointError(f"{path} has {path.stat().st_size:,} bytes; the limit is {MAX_TOKENIZER_BYTES:,}")
    if pickle_note(path):
        raise CheckpointError(f"{path} is not a SentencePiece model{pickle_note(path)}")
    return path


def load_tokenizer(folder, cfg: Optional[ModelConfig] = None) -> Tokenizer:
    path = check_tokenizer_file(check_folder(folder))
    try:
        tok = Tokenizer.load(path)
    except (RuntimeError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a valid SentencePiece model ({e})") from None
    if cfg is not None and tok.vocab_size != cfg.vocab_size:
        raise CheckpointError(f"{path} has {tok.vocab_size} pieces but {CONFIG} says vocab_size {cfg.vocab_size}")
    if cfg is not None and (tok.pad_id, tok.bos_id, tok.eos_id) != (cfg.pad_id, cfg.bos_id, cfg.eos_id):
        raise CheckpointError(f"{path} special ids (pad, bos, eos) = {(tok.pad_id, tok.bos_id, tok.eos_id)} "
                              f"differ from {CONFIG}")
    return tok
