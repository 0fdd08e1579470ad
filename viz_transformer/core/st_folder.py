"""A sentence-transformers folder (modules.json, 1_Pooling/, …) resolved to its Transformer module's folder.

A sentence encoder saves its transformer module at the top (path "") or in a subfolder such as 0_Transformer,
beside the pooling and normalising modules, which hold no model. Only modules.json is read: nothing in it
is run, and the module's path must stay inside the folder.
"""
from __future__ import annotations

from pathlib import Path

import json

from viz_transformer.core.checkpoint_files import MAX_JSON_BYTES, CheckpointError, inside

MODULES = "modules.json"
TRANSFORMER = "sentence_transformers.models.Transformer"


def is_st_folder(folder) -> bool:
    return (Path(folder) / MODULES).is_file()


def transformer_folder(folder) -> Path:
    """The folder holding the model: `folder` itself, or the Transformer module modules.json names; a
    sentence-transformers module without a model (1_Pooling, 2_Normalize) is refused, naming the folder to open."""
    folder = Path(folder)
    parent = folder.parent
    if not is_st_folder(folder):
        if (parent / MODULES).is_file() and not (folder / "model.safetensors").exists() \
                and not (folder / "model.safetensors.index.json").exists():
            raise CheckpointError(f"{folder} is a module of the sentence-transformers model in {parent} (it holds no "
                                  f"weights): open {parent} instead")
        return folder
    modules = _read_modules(folder)
    paths = [m.get("path", "") for m in modules if isinstance(m, dict) and m.get("type") == TRANSFORMER]
    if not paths:
        return folder                  # no Transformer module named: the folder is opened as it is
    sub = folder / str(paths[0])
    if not isinstance(paths[0], str) or not inside(sub, folder.resolve()) or not sub.is_dir():
        raise CheckpointError(f"{folder / MODULES} names the transformer module {paths[0]!r}, which is not a "
                              f"folder inside {folder}")
    return sub


def _read_modules(folder: Path) -> list:
    """modules.json: a JSON list (checkpoint_files.read_json reads objects only)."""
    path = folder / MODULES
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(f"{path} has {path.stat().st_size:,} bytes; the limit is {MAX_JSON_BYTES:,}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({str(e)[:200]})") from None
    if not isinstance(data, list):
        raise CheckpointError(f"{path} must hold a JSON list of modules")
    return data
