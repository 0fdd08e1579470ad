"""A model folder opened in one place: whether it is ours, a Hugging Face folder or a sentence-transformers
folder is decided here, and both the catalog (core.catalog) and load_checkpoint (run.capture) ask it.

    folder = open_folder("checkpoints/zh-en")
    folder.check()                                   # what the catalog lists: no weights read
    model, tok = folder.model(), folder.tokenizer()

Kinds: ours (config.json + model.safetensors + tokenizer.model + meta.json: core.checkpoint), a Hugging Face
`save_pretrained` folder (a config.json naming a model_type: core.hf_import, core.hf_tokenizer) and a
sentence-transformers folder (modules.json: core.st_folder), whose model is the Hugging Face folder of its
Transformer module. Weights come from safetensors only, never unpickled; every failure is a CheckpointError
whose one-line message names the file and what is wrong.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path

import torch

from viz_transformer.core import checkpoint as ck
from viz_transformer.core import hf_import as hf
from viz_transformer.core import st_folder as st
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.hf_tokenizer import hf_tokenizer
from viz_transformer.core.model import Transformer


class Folder:
    """One model folder. path: the folder as it was opened (the name the catalog lists and a HookedModel keeps);
    files: the folder that holds the model's files (a sentence-transformers folder's Transformer module, else
    path). config and meta are read once, on first use."""
    kind = ""

    def __init__(self, path: Path, files: Path):
        self.path, self.files = path, files

    def check(self, root=None) -> None:
        """What the catalog needs to list the folder, read without its weights (config, meta, the weights'
        headers, the tokenizer's file): CheckpointError for a missing or corrupt folder. root: the folder it is
        listed under, which it may not link out of."""
        raise NotImplementedError

    @property
    def config(self) -> ModelConfig:
        raise NotImplementedError

    @property
    def meta(self) -> dict:
        raise NotImplementedError

    def weights(self) -> dict[str, torch.Tensor]:
        """The state dict in our names, float32, checked against the config before it is read."""
        raise NotImplementedError

    def tokenizer(self):
        raise NotImplementedError

    def model(self) -> Transformer:
        """The config's model holding the folder's weights, in eval mode."""
        return ck.model_from_state(self.config, self.weights(), self.files)


class OurFolder(Folder):
    """config.json + model.safetensors + tokenizer.model + meta.json, as core.checkpoint.save_checkpoint writes."""
    kind = "ours"

    def check(self, root=None) -> None:
        ck.check_folder(self.files, root)
        _ = self.config, self.meta                   # read now: a broken config.json or meta.json fails the check
        ck.check_weights_header(self.files)
        ck.check_tokenizer_file(self.files)

    @cached_property
    def config(self) -> ModelConfig:
        return ck.read_config(self.files)

    @cached_property
    def meta(self) -> dict:
        return ck.read_meta(self.files)

    def weights(self) -> dict[str, torch.Tensor]:
        return ck.read_weights(self.files, self.config)

    def tokenizer(self):
        return ck.load_tokenizer(self.files, self.config)


class HFFolder(Folder):
    """A Hugging Face `save_pretrained` folder (or a cache snapshot, whose files link into its blobs/)."""
    kind = "Hugging Face"

    def check(self, root=None) -> None:
        if root is not None:
            base = Path(root).resolve()
            if not ck.inside(self.files, base) and not ck.inside(hf.link_base(self.files), base):
                raise ck.CheckpointError(f"{self.files} is a link to {self.files.resolve()}, outside {root}: refused")
        ck.model_bytes(self.config, self.files / ck.CONFIG)
        for shard in hf.weight_files(self.files):
            ck.safetensors_header(shard, dtypes=hf.HEADER_DTYPES)
        tok = "source.spm" if self.meta.get("model_type") == "marian" else "tokenizer.json"
        if self.config.is_encoder_only and not (self.files / tok).exists():
            tok = "vocab.txt"                                  # BERT's WordPiece vocabulary alone
        if self.meta.get("model_type") == "m2m_100" and not (self.files / tok).exists():
            tok = "sentencepiece.bpe.model"                    # M2M100Tokenizer's own files
        if not hf.folder_file(self.files, tok).is_file():
            raise ck.CheckpointError(f"{self.files} is missing {tok}")

    @cached_property
    def _config_meta(self) -> tuple[ModelConfig, dict]:
        return hf.read_hf(self.files)

    @property
    def config(self) -> ModelConfig:
        return self._config_meta[0]

    @property
    def meta(self) -> dict:
        return self._config_meta[1]

    def weights(self) -> dict[str, torch.Tensor]:
        return hf.hf_weights(self.files, self.config)

    def tokenizer(self):
        return hf_tokenizer(self.files, self.config, self.meta)


class SentenceTransformersFolder(HFFolder):
    """A sentence-transformers folder (modules.json, 1_Pooling/, …): the Hugging Face folder of its Transformer
    module (at the top or in a subfolder such as 0_Transformer); the pooling modules hold no model."""
    kind = "sentence-transformers"


def is_model_folder(folder) -> bool:
    """A folder that is one model (a config.json, or a sentence-transformers modules.json), not a folder of them."""
    folder = Path(folder)
    return (folder / ck.CONFIG).is_file() or st.is_st_folder(folder)


def open_folder(path) -> Folder:
    """The folder as the kind it is, decided from its config.json and modules.json alone. A missing or broken
    folder still opens (as ours, when nothing says otherwise) and fails in check() or on first read; only a
    broken modules.json, or a sentence-transformers module without weights, raises CheckpointError here."""
    path = Path(path)
    files = st.transformer_folder(path)
    if not hf.is_hf_folder(files):
        return OurFolder(path, files)
    return (SentenceTransformersFolder if st.is_st_folder(path) else HFFolder)(path, files)

