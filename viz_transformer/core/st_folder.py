"""A sentence-transformers folder (modules.json, 1_Pooling/, …): where its Transformer module's model is, and
the pipeline that turns that model's last hidden states into one sentence embedding (pooling, Dense layers,
normalising).

Only modules.json and the modules' JSON configs are read, and Dense weights from safetensors: nothing in the
folder is run or unpickled, and every module path must stay inside the folder. Module types are matched by
their last name, so both the old names ("sentence_transformers.models.Pooling") and version 6's
("sentence_transformers.sentence_transformer.modules.pooling.Pooling") are understood.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from viz_transformer.core.checkpoint_files import MAX_JSON_BYTES, CheckpointError, inside, read_json

MODULES = "modules.json"
# the pooling modes sentence-transformers knows, in the order it concatenates the legacy flags
MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
LEGACY = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
          "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
          "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
ACTIVATIONS = {"Tanh": torch.tanh, "Identity": lambda x: x}      # a Dense module's, by class name


@dataclass(frozen=True)
class Dense:
    """A Dense module: y = activation(W x + b)."""
    weight: torch.Tensor            # [out, in]
    bias: torch.Tensor | None       # [out]
    activation: str                 # a key of ACTIVATIONS


@dataclass(frozen=True)
class SentencePipeline:
    """What follows the transformer: pooling over the pieces, then each Dense layer, then (normalize) unit
    length. declared: the folder names its pooling (a sentence-transformers folder); otherwise mean pooling is
    this project's convention for an encoder without one."""
    modes: tuple[str, ...] = ("mean",)
    dense: tuple[Dense, ...] = ()
    normalize: bool = False
    max_seq_length: int = 0          # sentence_bert_config.json's cut (0: none stated)
    declared: bool = False

    def beyond(self, n_pieces: int) -> int:
        """How many of a text's pieces sentence-transformers' encode would cut (it reads max_seq_length)."""
        return max(0, n_pieces - self.max_seq_length) if self.max_seq_length else 0


def is_st_folder(folder) -> bool:
    return (Path(folder) / MODULES).is_file()


def kind_of(module: dict) -> str:
    """A module's type by its last name: "Transformer", "Pooling", "Dense", "Normalize", …"""
    return str(module.get("type", "")).rsplit(".", 1)[-1]


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
    found = [m for m in read_modules(folder) if kind_of(m) == "Transformer"]
    return module_folder(folder, found[0]) if found else folder     # none named: the folder as it is


def module_folder(folder: Path, module: dict) -> Path:
    sub = module.get("path", "")
    path = folder / str(sub)
    if not isinstance(sub, str) or not inside(path, folder.resolve()) or not path.is_dir():
        raise CheckpointError(f"{folder / MODULES} names the module folder {sub!r}, which is not a folder inside "
                              f"{folder}")
    return path


def read_modules(folder: Path) -> list[dict]:
    """modules.json: a JSON list of module objects (checkpoint_files.read_json reads objects only)."""
    path = Path(folder) / MODULES
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(f"{path} has {path.stat().st_size:,} bytes; the limit is {MAX_JSON_BYTES:,}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({str(e)[:200]})") from None
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise CheckpointError(f"{path} must hold a JSON list of modules")
    return data


def pooling_modes(cfg: dict, where: Path) -> tuple[str, ...]:
    """A Pooling config's modes: version 6's "pooling_mode" (a name or a list), or the legacy flags; none set
    means mean, as sentence-transformers reads it."""
    mode = cfg.get("pooling_mode")
    if mode is None:
        modes = tuple(m for key, m in LEGACY.items() if cfg.get(key))
    else:
        modes = (mode,) if isinstance(mode, str) else tuple(mode) if isinstance(mode, list) else (repr(mode),)
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise CheckpointError(f"{where} names the pooling mode {bad[0]!r}; known: {', '.join(MODES)}")
    return modes or ("mean",)


def read_dense(folder: Path) -> Dense:
    cfg = read_json(folder, "config.json")
    act = str(cfg.get("activation_function", "torch.nn.modules.activation.Tanh")).rsplit(".", 1)[-1]
    if act not in ACTIVATIONS:
        raise CheckpointError(f"{folder / 'config.json'}: the Dense activation {act!r} is not supported "
                              f"(supported: {', '.join(ACTIVATIONS)})")
    path = folder / "model.safetensors"
    if not path.is_file():
        raise CheckpointError(f"{folder} has no model.safetensors (a Dense module's weights are read from "
                              f"safetensors only, never unpickled)")
    from safetensors.torch import load_file
    try:
        w = load_file(str(path))
    except Exception as e:                                          # the Rust side raises its own errors
        raise CheckpointError(f"{path} is not a valid safetensors file ({str(e)[:200]})") from None
    if "linear.weight" not in w:
        raise CheckpointError(f"{path} has no linear.weight")
    return Dense(w["linear.weight"].double(), w["linear.bias"].double() if "linear.bias" in w else None, act)


def sentence_pipeline(folder) -> SentencePipeline:
    """The pipeline a folder's modules.json describes (mean pooling, undeclared, for any other folder).
    CheckpointError for a module this project cannot apply, so no embedding is shown that its library would
    not give."""
    folder = Path(folder)
    if not is_st_folder(folder):
        return SentencePipeline()
    modes, dense, normalize = ("mean",), [], False
    for m in read_modules(folder):
        kind = kind_of(m)
        if kind == "Transformer":
            continue
        if kind == "Normalize":                 # holds no file: its folder may be missing (all-MiniLM-L6-v2's is)
            normalize = True
        elif kind == "Pooling":
            sub = module_folder(folder, m)
            modes = pooling_modes(read_json(sub, "config.json"), sub / "config.json")
        elif kind == "Dense":
            dense.append(read_dense(module_folder(folder, m)))
        else:
            raise CheckpointError(f"{folder / MODULES} names the module {m.get('type')!r}, which this project does "
                                  f"not apply (known: Transformer, Pooling, Dense, Normalize)")
    return SentencePipeline(modes, tuple(dense), normalize, _cut(folder, transformer_folder(folder)), declared=True)


def _cut(folder: Path, model: Path) -> int:
    """The pieces encode reads: sentence_bert_config.json's max_seq_length (older versions wrote it), else the
    tokenizer's model_max_length (version 6 keeps it there); 0 when neither states one."""
    for where, name, key in ((model, "sentence_bert_config.json", "max_seq_length"),
                             (folder, "sentence_bert_config.json", "max_seq_length"),
                             (model, "tokenizer_config.json", "model_max_length")):
        value = read_json(where, name).get(key) if (where / name).is_file() else None
        if isinstance(value, int) and 0 < value < 1 << 20:       # transformers writes 1e30 for "no limit"
            return value
    return 0
