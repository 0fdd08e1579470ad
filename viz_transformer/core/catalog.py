"""The checkpoints under a folder, as the app's sidebar lists them: ours, Hugging Face model folders
(sentence-transformers folders too), and the snapshots of a Hugging Face cache (models--ORG--NAME/snapshots/
REVISION, listed as ORG/NAME); several roots together (list_roots), a root that is itself a model included.

Each is checked without reading its weights (config, weight headers, tokenizer files); a broken one is
listed with its error. A listing is remembered until a file in the folder changes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from viz_transformer.core import folders
from viz_transformer.core.checkpoint_files import DEFAULT_ROOT, CheckpointError
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


def _folder_looks(name: str, folder: Path) -> tuple:
    """One folder's files from stat calls only: names, link targets, sizes and times."""
    entry = [name, str(folder.resolve()) if folder.is_symlink() else ""]
    for f in sorted(folder.iterdir()) if folder.is_dir() else ():
        try:
            st_ = f.stat()
            entry.append((f.name, st_.st_ino, st_.st_size, st_.st_mtime_ns, f.is_symlink()))
        except OSError:
            entry.append((f.name, None))
    return tuple(entry)


def _looks(root: Path) -> tuple:
    """What list_checkpoints depends on, from stat calls only: names, link targets, file sizes and times."""
    return tuple(_folder_looks(name, folder) for name, folder in _entries(root))


def _check(name: str, folder: Path, root: Path) -> CheckpointInfo:
    """One folder checked without reading its weights (core.folders); a broken one carries its error."""
    info = CheckpointInfo(name, folder)
    try:
        opened = folders.open_folder(folder)
        opened.check(root)
        info.config, info.meta = opened.config, opened.meta
    except CheckpointError as e:
        info.error = str(e)
    return info


def is_model_folder(folder) -> bool:
    """A folder that is one model (ours, a Hugging Face folder, a sentence-transformers folder, a Hugging Face
    cache's models--ORG--NAME), not a folder of models."""
    return folders.is_model_folder(folder) or cache_snapshot(Path(folder)) is not None


def list_roots(roots) -> list[CheckpointInfo]:
    """The checkpoints of several roots, in the roots' order: each root's folders (list_checkpoints), or the
    root itself when it is a model folder (a Hugging Face cache's models--ORG--NAME too). A name an earlier
    root already gave is listed as "name (root)", "name (root 2)", …: the first root's names (the shipped
    folder's) never change meaning, so ?checkpoint= links to them stay unambiguous."""
    out, seen = [], set()
    for root in (Path(r) for r in roots):
        if not root.is_dir():
            continue
        if is_model_folder(root):
            snap = cache_snapshot(root)
            name = "/".join(root.name.split("--")[1:]) if snap is not None else root.name
            infos = [_single(name, snap or root, root)]
        else:
            infos = list_checkpoints(root)
        for info in infos:
            name, k = info.name, 1
            while name in seen:
                k += 1
                name = f"{info.name} ({root.name}{'' if k == 2 else f' {k - 1}'})"
            seen.add(name)
            out.append(info if name == info.name else CheckpointInfo(name, info.path, info.error, info.config,
                                                                     info.meta))
    return out


def _single(name: str, folder: Path, root: Path) -> CheckpointInfo:
    """A root that is one model folder, checked once until a file in it changes."""
    looks, key = _folder_looks(name, folder), ("folder", str(folder.resolve()))
    hit = _LISTED.get(key)
    if hit is None or hit[0] != looks:
        hit = _LISTED[key] = (looks, [_check(name, folder, root)])
    return hit[1][0]


def list_checkpoints(root=DEFAULT_ROOT) -> list[CheckpointInfo]:
    """Every checkpoint under `root`, sorted by name; broken ones carry their error message."""
    root = Path(root)
    if not root.is_dir():
        return []
    looks = _looks(root)
    key = str(root.resolve())
    hit = _LISTED.get(key)
    if hit is not None and hit[0] == looks:
        return list(hit[1])
    out = [_check(name, folder, root) for name, folder in _entries(root)]
    _LISTED[key] = (looks, out)
    return list(out)
