"""The checkpoints under a folder, as the app's sidebar lists them: ours, Hugging Face model folders, and
the snapshots of a Hugging Face cache (models--ORG--NAME/snapshots/REVISION, listed as ORG/NAME).

Each is checked without reading its weights (config, weight headers, tokenizer files); a broken one is
listed with its error. A listing is remembered until a file in the folder changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from viz_transformer.core import checkpoint as ck
from viz_transformer.core import hf_import as hf
from viz_transformer.core import st_folder as st
from viz_transformer.core.config import ModelConfig


@dataclass
class CheckpointInfo:
    name: str
    path: Path
    error: Optional[str] = None      # None when the folder looks loadable
    config: Optional[ModelConfig] = None
    meta: Optional[dict] = None


_LISTED: dict = {}        # root -> (what the folder looked like, the infos made from it)


def cache_snapshot(folder: Path) -> Optional[Path]:
    """A Hugging Face cache entry's snapshot: the revision refs/main names, else the newest one."""
    snaps = folder / "snapshots"
    if not folder.name.startswith("models--") or not snaps.is_dir():
        return None
    ref = folder / "refs" / "main"
    if ref.is_file():
        rev = ref.read_text(encoding="utf-8").strip()
        if rev and "/" not in rev and (snaps / rev).is_dir():
            return snaps / rev
    found = sorted((p for p in snaps.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _entries(root: Path) -> list[tuple[str, Path]]:
    out = []
    for p in sorted(x for x in root.iterdir() if x.is_dir() and not x.name.startswith((".", "_"))):
        snap = cache_snapshot(p)
        if snap is not None:
            out.append(("/".join(p.name.split("--")[1:]), snap))
        else:
            out.append((p.name, p))
    return out


def _looks(root: Path) -> tuple:
    """What list_checkpoints depends on, from stat calls only: names, link targets, file sizes and times."""
    out = []
    for name, folder in _entries(root):
        entry = [name, str(folder.resolve()) if folder.is_symlink() else ""]
        for f in sorted(folder.iterdir()) if folder.is_dir() else ():
            try:
                st = f.stat()
                entry.append((f.name, st.st_ino, st.st_size, st.st_mtime_ns, f.is_symlink()))
            except OSError:
                entry.append((f.name, None))
        out.append(tuple(entry))
    return tuple(out)


def _check_hf(folder: Path, root: Path) -> tuple[ModelConfig, dict]:
    if not ck._inside(folder, root.resolve()) and not ck._inside(hf._base(folder), root.resolve()):
        raise ck.CheckpointError(f"{folder} is a link to {folder.resolve()}, outside {root}: refused")
    cfg, meta = hf.read_hf(folder)
    ck.model_bytes(cfg, folder / "config.json")
    for shard in hf._shards(folder):
        ck._header(shard, dtypes=hf.HEADER_DTYPES)
    tok = "source.spm" if meta.get("model_type") == "marian" else "tokenizer.json"
    if cfg.is_encoder_only and not (folder / tok).exists():
        tok = "vocab.txt"                                      # BERT's WordPiece vocabulary alone
    if not hf._file(folder, tok).is_file():
        raise ck.CheckpointError(f"{folder} is missing {tok}")
    return cfg, meta


def list_checkpoints(root=ck.DEFAULT_ROOT) -> list[CheckpointInfo]:
    """Every checkpoint under `root`, sorted by name; broken ones carry their error message."""
    root = Path(root)
    if not root.is_dir():
        return []
    looks = _looks(root)
    key = str(root.resolve())
    hit = _LISTED.get(key)
    if hit is not None and hit[0] == looks:
        return list(hit[1])
    out = []
    for name, folder in _entries(root):
        info = CheckpointInfo(name, folder)
        try:
            folder = st.transformer_folder(folder)       # a sentence-transformers folder: its transformer module
            if hf.is_hf_folder(folder):
                info.config, info.meta = _check_hf(folder, root)
            else:
                ck.check_folder(folder, root)
                info.config = ck.read_config(folder)
                info.meta = ck.read_meta(folder)
                ck.check_weights_header(folder)
                ck.check_tokenizer_file(folder)
        except ck.CheckpointError as e:
            info.error = str(e)
        out.append(info)
    _LISTED[key] = (looks, out)
    return list(out)
