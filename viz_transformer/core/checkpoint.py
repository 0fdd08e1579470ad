"""Checkpoint folders: config.json + model.safetensors + tokenizer.model + meta.json.

Loading never unpickles. Every failure names the file and says what is wrong.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Optional

import torch
from safetensors import SafetensorError
from torch.overrides import TorchFunctionMode
from safetensors.torch import load as load_bytes, save_file

from viz_transformer.core.checkpoint_files import (  # noqa: F401  (callers name them ck.X)
    CONFIG, DEFAULT_ROOT, FILES, META, TOKENIZER, WEIGHTS, CheckpointError, inside, read_json, pickle_note,
    check_folder, check_tokenizer_file, load_tokenizer, read_config_json, read_meta)
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.model import Transformer
from viz_transformer.core.tokenizer import Tokenizer

MAX_HEADER_BYTES = 16 << 20       # the safetensors JSON header
MAX_MODEL_BYTES = 8 << 30         # float32 weights and buffers a config may ask for (8 GiB: 2B parameters, NLLB-1.3B and
                                  # Qwen2.5-1.5B open; an absurd config is refused before anything is allocated)
DTYPES = {"F16": 2, "BF16": 2, "F32": 4}
CHECKSUM = "weights_sha256"       # meta.json key: sha256 of model.safetensors, written by save_checkpoint


def read_config(folder) -> ModelConfig:
    """config.json (checkpoint_files.read_config_json), refused when its model is over MAX_MODEL_BYTES."""
    cfg = read_config_json(folder)
    model_bytes(cfg, Path(folder) / CONFIG)
    return cfg


class NoRandomInit(TorchFunctionMode):
    """Skips random initialisation on the meta device, which holds no numbers anyway: there `normal_` (like
    `arange` and `mul`: positional.py avoids them) runs a Python reference whose first call imports
    torch._dynamo, a cost the app's cold start need not pay."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        t = args[0] if args else kwargs.get("tensor")        # torch.nn.init passes it by keyword
        init = (func in (torch.Tensor.normal_, torch.Tensor.uniform_)
                or getattr(func, "__module__", "") == "torch.nn.init")
        if init and isinstance(t, torch.Tensor) and t.is_meta:
            return t
        return func(*args, **kwargs)


def meta_reference(cfg: ModelConfig) -> Transformer:
    """The model the config describes, on the meta device: its shapes, with no memory allocated. Kept per
    config (read only: callers read its shapes and tied names), since a load asked for it twice (the size
    check, then the weights' check) and building it was a third of a translator's load time."""
    return _meta_model(json.dumps(cfg.to_dict(), sort_keys=True))


@functools.lru_cache(maxsize=8)
def _meta_model(config_json: str) -> Transformer:
    with torch.device("meta"), NoRandomInit():
        return Transformer(ModelConfig.from_dict(json.loads(config_json)))


def model_bytes(cfg: ModelConfig, where="config", ref: Optional[Transformer] = None) -> int:
    """float32 bytes of the model's weights and buffers (counted on `ref`, built with meta_reference(cfg) when not
    given); CheckpointError above MAX_MODEL_BYTES."""
    ref = ref if ref is not None else meta_reference(cfg)
    n = sum(t.numel() for t in ref.parameters()) + sum(t.numel() for t in ref.buffers())
    if 4 * n > MAX_MODEL_BYTES:
        raise CheckpointError(f"{where} asks for a model of {4 * n / 2**30:,.1f} GiB ({n:,} numbers); "
                              f"the limit is {MAX_MODEL_BYTES / 2**30:.0f} GiB")
    return 4 * n


def n_parameters(cfg: ModelConfig) -> int:
    """The model's parameter count (tied weights once), from its config alone: no weights read or allocated."""
    return sum(p.numel() for p in meta_reference(cfg).parameters())


def unique_state_dict(model: torch.nn.Module) -> dict:
    """state_dict with each tied tensor once (e.g. lm_head.weight is W_E.weight), on the CPU."""
    seen, out = set(), {}
    for name, t in model.state_dict().items():
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            out[name] = t.detach().cpu()
    return out


def save_checkpoint(folder, model: Transformer, tokenizer: Tokenizer, meta: dict, fp16: bool = True) -> Path:
    """Write the four files. Tied weights are stored once; float16 halves the size; meta.json gets
    the weights' sha256, so a bit flipped later is caught on load."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: (t.half() if fp16 and t.is_floating_point() else t).contiguous()
               for name, t in unique_state_dict(model).items()}
    tmp = folder / (WEIGHTS + ".tmp")
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    tmp.replace(folder / WEIGHTS)
    (folder / CONFIG).write_text(json.dumps(model.cfg.to_dict(), indent=2) + "\n", encoding="utf-8")
    tokenizer.save(folder / TOKENIZER)
    meta = {**meta, CHECKSUM: digest}
    (folder / META).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def safetensors_header(path: Path, data: Optional[bytes] = None, dtypes: Optional[dict] = None) -> tuple[int, dict]:
    """(header length, header) of a safetensors file (read from `data` when given, so what is
    checked is what gets loaded), checked for structure: every tensor has a known dtype (one of `dtypes`,
    default DTYPES: name -> bytes per element), a shape and offsets that tile the data section exactly
    (catches truncation)."""
    dtypes = dtypes or DTYPES
    size = len(data) if data is not None else path.stat().st_size
    try:
        if data is None:
            with open(path, "rb") as f:
                head = f.read(8)
                n = int.from_bytes(head, "little")
                raw = f.read(n) if 0 < n <= MAX_HEADER_BYTES else b""
        else:
            n = int.from_bytes(data[:8], "little")
            raw = data[8: 8 + n] if 0 < n <= MAX_HEADER_BYTES else b""
        if size < 8 or n <= 0 or 8 + n > size or n > MAX_HEADER_BYTES:
            raise ValueError("header length out of range")
        header = json.loads(raw)
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        header.pop("__metadata__", None)
        spans = []
        for name, v in header.items():
            shape, (a, b) = [int(d) for d in v["shape"]], v["data_offsets"]
            if v["dtype"] not in dtypes:
                raise ValueError(f"{name} has dtype {v['dtype']}; expected one of {', '.join(dtypes)}")
            if min(shape, default=1) < 0 or b - a != math.prod(shape) * dtypes[v["dtype"]]:
                raise ValueError(f"{name}: shape {shape} does not fit its {b - a} bytes")
            spans.append((a, b))
        spans.sort()
        if any(x[1] != y[0] for x, y in zip(spans, spans[1:])) or (spans and spans[0][0] != 0):
            raise ValueError("tensor byte ranges overlap or leave gaps")
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is truncated or corrupt ({e}){pickle_note(path)}") from None
    end = spans[-1][1] if spans else 0
    if 8 + n + end != size:
        raise CheckpointError(f"{path} is truncated or corrupt: header promises {8 + n + end} bytes, "
                              f"the file has {size}")
    return n, header


def read_weights(folder, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The state dict of model.safetensors as float32 (tied tensors once), checked before anything is allocated:
    the header's names and shapes against the config's model (built on the meta device), the size against
    MAX_MODEL_BYTES; then the bytes against meta.json's checksum (when recorded) and for NaN/inf."""
    folder = check_folder(folder)
    path = folder / WEIGHTS
    ref = meta_reference(cfg)
    need = model_bytes(cfg, folder / CONFIG, ref)
    named = ref.state_dict(keep_vars=True)
    first = {}                                   # tied tensors: every alias -> the first name
    for name, t in named.items():
        first.setdefault(id(t), name)
    size, limit = path.stat().st_size, need + MAX_HEADER_BYTES + 8
    if size > limit:
        raise CheckpointError(f"{path} has {size:,} bytes, more than the model in {CONFIG} can hold ({limit:,})")
    data = path.read_bytes()
    _, header = safetensors_header(path, data)
    unexpected = sorted(set(header) - set(named))
    if unexpected:
        raise CheckpointError(f"{path} does not match {CONFIG}: unexpected tensors {', '.join(unexpected[:5])}")
    for name, v in header.items():
        if tuple(v["shape"]) != tuple(named[name].shape):
            raise CheckpointError(f"{path} does not match {CONFIG}: {name} has shape {tuple(v['shape'])}, "
                                  f"the config needs {tuple(named[name].shape)}")
    covered = {id(named[k]) for k in header}
    missing = [k for k, t in named.items() if id(t) not in covered and k == first[id(t)]]
    if missing:
        raise CheckpointError(f"{path} does not match {CONFIG}: missing tensors {', '.join(missing[:5])}")
    want = read_json(folder, META).get(CHECKSUM) if (folder / META).is_file() else None
    if want is not None and hashlib.sha256(data).hexdigest() != want:
        raise CheckpointError(f"{path} does not match the sha256 recorded in {META}: the file changed "
                              f"after it was saved (a flipped bit or a partial copy)")
    try:
        tensors = load_bytes(data)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path} is truncated or corrupt ({e})") from None
    # exact from float16 and bfloat16, NaN and inf too; a copy always, since load_bytes' tensors are views of
    # read-only bytes and these become the model's own parameters
    floats = {k: v.to(torch.float32, copy=True) for k, v in tensors.items()}
    bad = next((k for k, v in tensors.items() if v.is_floating_point() and not _finite(floats[k])), None)
    if bad:
        raise CheckpointError(f"{path} is corrupt: {bad} holds NaN or infinite values")
    return floats


def model_from_state(cfg: ModelConfig, state: dict, where="the weights") -> Transformer:
    """The config's model holding `state` (checked names and shapes, tied tensors once under any of their names):
    built on the meta device, whose tensors the state's replace, so no weight is allocated twice or drawn at
    random. CheckpointError naming `where` when a weight or buffer is left without a value."""
    with torch.device("meta"), NoRandomInit():
        model = Transformer(cfg)
    model.load_state_dict(state, strict=False, assign=True)
    if cfg.tie_embeddings:                    # assign replaced one of the tied tensors: tie the other to it
        embed = model.dec_embed.W_E
        if embed.weight.is_meta:
            embed.weight = model.lm_head.weight
        else:
            model.lm_head.weight = embed.weight
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise CheckpointError(f"{where}: no weights for {', '.join(left[:5])}")
    return model.eval()


def load_weights(folder, cfg: ModelConfig) -> Transformer:
    """The model of model.safetensors (read_weights, then model_from_state)."""
    return model_from_state(cfg, read_weights(folder, cfg), Path(folder) / WEIGHTS)


def _finite(t: torch.Tensor) -> bool:
    """Every value of a float32 tensor finite. A finite sum proves it (a NaN or an infinity makes any sum NaN or
    infinite) at a twenty-fifth of isfinite's cost; only a sum that overflowed needs the element-wise check."""
    return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())


def check_weights_header(folder) -> None:
    """Cheap integrity check of model.safetensors without reading the tensors (see safetensors_header)."""
    safetensors_header(Path(folder) / WEIGHTS)
