"""A run, a table or a figure as files: .npz / .json (tensors by capture name), CSV, standalone HTML.

    write_run(run, "run.npz")              # or run.json; read_run(path) gives the same tensors back
    figure_html(fig)                       # one offline HTML page (Plotly's JS inlined)
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd
import torch

TOKEN_KEYS = ("tokens.src", "tokens.tgt")
FORMATS = (".npz", ".json")


def run_tokens(run) -> dict:
    """The token lists and the output of a run, under the keys the files use."""
    return {"tokens.src": list(run.src_pieces or []), "tokens.tgt": list(run.tgt_pieces), "output": run.output}


def npz_bytes(run) -> bytes:
    """Every captured tensor (key = capture name, numpy dtype kept) plus tokens.src / tokens.tgt / output."""
    arrays = {k: v.numpy() for k, v in run.cache.items()}
    arrays.update({k: np.array(v, dtype=str) for k, v in run_tokens(run).items()})
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def json_bytes(run) -> bytes:
    """{capture name: nested values, ..., "shapes": {name: shape}, "dtypes": {name: dtype},
    "tokens.src", "tokens.tgt", "output"}: UTF-8 JSON, tokens verbatim."""
    doc = {k: v.tolist() for k, v in run.cache.items()}
    doc["shapes"] = {k: list(v.shape) for k, v in run.cache.items()}
    doc["dtypes"] = {k: str(v.dtype).replace("torch.", "") for k, v in run.cache.items()}
    doc.update(run_tokens(run))
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def run_bytes(run, fmt: str) -> bytes:
    """".npz" or ".json" bytes of a run; ValueError for any other format."""
    if fmt == ".npz":
        return npz_bytes(run)
    if fmt == ".json":
        return json_bytes(run)
    raise ValueError(f"the file must end in .npz or .json, not {fmt or '(nothing)'}")


def write_run(run, path) -> Path:
    path = Path(path)
    data = run_bytes(run, path.suffix)
    path.write_bytes(data)
    return path


def read_run(source: Union[str, Path, bytes], fmt: str = None) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors by capture name, {"tokens.src", "tokens.tgt", "output"}) from a file or its bytes."""
    if isinstance(source, (str, Path)):
        fmt = fmt or Path(source).suffix
        source = Path(source).read_bytes()
    if fmt == ".npz":
        with np.load(io.BytesIO(source)) as d:
            meta = {k: (str(d[k]) if k == "output" else [str(x) for x in d[k]]) for k in (*TOKEN_KEYS, "output")}
            tensors = {k: torch.from_numpy(d[k].copy()) for k in d.files if k not in meta}
        return tensors, meta
    if fmt == ".json":
        doc = json.loads(source.decode("utf-8"))
        shapes, dtypes = doc.pop("shapes"), doc.pop("dtypes")
        meta = {k: doc.pop(k) for k in (*TOKEN_KEYS, "output")}
        tensors = {k: torch.tensor(v, dtype=getattr(torch, dtypes[k])).reshape(shapes[k]) for k, v in doc.items()}
        return tensors, meta
    raise ValueError(f"the file must end in .npz or .json, not {fmt or '(nothing)'}")


def csv_bytes(df: pd.DataFrame) -> bytes:
    """A table as UTF-8 CSV (with a BOM, so spreadsheet programs read Chinese pieces right)."""
    return df.to_csv(index=False).encode("utf-8-sig")


def figure_html(fig) -> str:
    """One figure as a standalone HTML page that works offline (Plotly's JS inlined)."""
    return fig.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})
