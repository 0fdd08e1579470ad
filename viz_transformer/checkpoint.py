"""Checkpoint folders: config.json + model.safetensors + tokenizer.model + meta.json.

Loading never unpickles. Every failure names the file and says what is wrong.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .config import ModelConfig
from .model import Transformer
from .tokenizer import Tokenizer

CONFIG, WEIGHTS, TOKENIZER, META = "config.json", "model.safetensors", "tokenizer.model", "meta.json"
FILES = (CONFIG, WEIGHTS, TOKENIZER, META)
DEFAULT_ROOT = Path(__file__).resolve().parent.parent / "checkpoints"


class CheckpointError(ValueError):
    """A checkpoint folder or one of its files is missing, corrupt or inconsistent."""


def _read_json(folder: Path, name: str) -> dict:
    try:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{folder / name} is not valid JSON ({e})") from None
    except UnicodeDecodeError:
        raise CheckpointError(f"{folder / name} is not UTF-8 text") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{folder / name} must hold a JSON object")
    return data


def check_folder(folder) -> Path:
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint folder {folder} does not exist")
    missing = [f for f in FILES if not (folder / f).is_file()]
    if missing:
        raise CheckpointError(f"{folder} is missing {', '.join(missing)}")
    return folder


def read_config(folder) -> ModelConfig:
    folder = check_folder(folder)
    try:
        return ModelConfig.from_dict(_read_json(folder, CONFIG))
    except (TypeError, ValueError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"{folder / CONFIG}: {e}") from None


def unique_state_dict(model: torch.nn.Module) -> dict:
    """state_dict with each tied tensor once (e.g. lm_head.weight is W_E.weight), on the CPU."""
    seen, out = set(), {}
    for name, t in model.state_dict().items():
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            out[name] = t.detach().cpu()
    return out


def save_checkpoint(folder, model: Transformer, tokenizer: Tokenizer, meta: dict, fp16: bool = True) -> Path:
    """Write the four files. Tied weights are stored once; float16 halves the size."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: (t.half() if fp16 and t.is_floating_point() else t).contiguous()
               for name, t in unique_state_dict(model).items()}
    tmp = folder / (WEIGHTS + ".tmp")
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(folder / WEIGHTS)
    (folder / CONFIG).write_text(json.dumps(model.cfg.to_dict(), indent=2) + "\n", encoding="utf-8")
    tokenizer.save(folder / TOKENIZER)
    (folder / META).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def load_weights(folder, cfg: ModelConfig) -> Transformer:
    folder = Path(folder)
    path = folder / WEIGHTS
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path} is truncated or corrupt ({e})") from None
    model = Transformer(cfg)
    expected = model.state_dict()
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise CheckpointError(f"{path} does not match {CONFIG}: unexpected tensors {', '.join(unexpected[:5])}")
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise CheckpointError(f"{path} does not match {CONFIG}: {name} has shape {tuple(t.shape)}, "
                                  f"the config needs {tuple(expected[name].shape)}")
    result = model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    # keys absent from the file must be tied copies of keys that were present
    state = model.state_dict()
    ptr = {t.data_ptr() for k, t in state.items() if k in tensors}
    really_missing = [k for k in result.missing_keys if state[k].data_ptr() not in ptr]
    if really_missing:
        raise CheckpointError(f"{path} does not match {CONFIG}: missing tensors {', '.join(really_missing[:5])}")
    return model.eval()


def load_tokenizer(folder, cfg: Optional[ModelConfig] = None) -> Tokenizer:
    path = Path(folder) / TOKENIZER
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


def check_weights_header(folder) -> None:
    """Cheap integrity check of model.safetensors without reading the tensors: the JSON header
    parses and the data section has exactly the bytes the header promises (catches truncation)."""
    path = Path(folder) / WEIGHTS
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n <= 0 or 8 + n > size:
                raise ValueError("header length out of range")
            header = json.loads(f.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise CheckpointError(f"{path} is truncated or corrupt ({e})") from None
    if 8 + n + end != size:
        raise CheckpointError(f"{path} is truncated or corrupt: header promises {8 + n + end} bytes, "
                              f"the file has {size}")


def read_meta(folder) -> dict:
    return _read_json(Path(folder), META)


@dataclass
class CheckpointInfo:
    name: str
    path: Path
    error: Optional[str] = None      # None when the folder looks loadable
    config: Optional[ModelConfig] = None
    meta: Optional[dict] = None


def list_checkpoints(root=DEFAULT_ROOT) -> list[CheckpointInfo]:
    """Every folder under `root`, sorted by name; broken ones carry their error message."""
    root = Path(root)
    out = []
    if not root.is_dir():
        return out
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        info = CheckpointInfo(folder.name, folder)
        try:
            info.config = read_config(folder)
            info.meta = read_meta(folder)
            check_weights_header(folder)
        except CheckpointError as e:
            info.error = str(e)
        out.append(info)
    return out
