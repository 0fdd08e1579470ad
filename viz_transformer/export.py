"""A run, a table or a figure as files: .npz / .json (tensors by capture name), CSV, standalone HTML.

    write_run(run, "run.npz")              # or run.json; read_run(path) gives the same tensors back
    figure_html(fig)                       # one offline HTML page (Plotly's JS inlined)

A long text's run is large (2,048 pieces on a Qwen2.5-0.5B-sized model: 5.6 GB of patterns and as much of
scores), so the .npz is written one tensor at a time, and a run over LIMIT bytes leaves out the scores and
patterns that recompute exactly from q, k, v and mask (a lean run's): the file lists them under `recomputed`,
and read_run computes them back.
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd
import torch

from viz_transformer.run.derived_cache import DERIVED, recompute

TOKEN_KEYS = ("tokens.src", "tokens.tgt")
FORMATS = (".npz", ".json")
LIMIT = 1 << 30            # bytes of tensors above which a file leaves out what it can recompute (.npz) or is refused (.json)
RECOMPUTED = "recomputed"  # the .npz key listing the captures left out, to recompute on read


def run_tokens(run) -> dict:
    """The token lists and the output of a run, under the keys the files use."""
    return {"tokens.src": list(run.src_pieces or []), "tokens.tgt": list(run.tgt_pieces), "output": run.output}


def recomputable(run) -> dict[str, str]:
    """{capture name: its attention block} for the scores and patterns this run recomputes on read (a lean or
    compacted run's; empty for a plain run)."""
    return dict(getattr(run.cache, "derived", {}))


def _derived_nbytes(run, prefix: str) -> int:
    """The bytes of one recomputed [batch, head, q, k] tensor of block `prefix`, from its q and k (not computed)."""
    stored = run.cache._t
    q = stored.get(f"{prefix}.hook_rot_q", stored.get(f"{prefix}.hook_q"))
    k = stored.get(f"{prefix}.hook_rot_k", stored.get(f"{prefix}.hook_k"))
    return q.shape[0] * q.shape[2] * q.shape[1] * k.shape[1] * q.element_size()


def tensor_nbytes(run) -> int:
    """The bytes of every captured tensor of the run at full size, recomputed ones counted, none computed."""
    derived = recomputable(run)
    stored = sum(t.numel() * t.element_size() for n, t in run.cache._t.items() if n not in derived)
    return stored + sum(_derived_nbytes(run, prefix) for prefix in derived.values())


def left_out(run) -> list[str]:
    """The captures a file of this run leaves out (recomputed by read_run): none unless it is over LIMIT."""
    return list(recomputable(run)) if tensor_nbytes(run) > LIMIT else []


def npz_bytes(run) -> bytes:
    """Every captured tensor (key = capture name, numpy dtype kept) plus tokens.src / tokens.tgt / output, written
    one tensor at a time (np.savez's layout: one .npy per key in a deflated zip). Over LIMIT, the recomputable
    scores and patterns are left out and listed under `recomputed`."""
    skip = left_out(run)
    extra = {k: np.array(v, dtype=str) for k, v in run_tokens(run).items()}
    if skip:
        extra[RECOMPUTED] = np.array(skip, dtype=str)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        arrays = ((k, lambda k=k: run.cache[k].numpy()) for k in run.cache.keys() if k not in skip)
        for key, get in [*arrays, *((k, lambda v=v: v) for k, v in extra.items())]:
            with zf.open(f"{key}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(get()), allow_pickle=False)
    return buf.getvalue()


def json_bytes(run) -> bytes:
    """{capture name: nested values, ..., "shapes": {name: shape}, "dtypes": {name: dtype},
    "tokens.src", "tokens.tgt", "output"}: UTF-8 JSON, tokens verbatim. ValueError over LIMIT (use .npz)."""
    if (size := tensor_nbytes(run)) > LIMIT:
        raise ValueError(f"this run's tensors are {size / 1e9:.1f} GB, too large for JSON text: use .npz")
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
            skip = [str(x) for x in d[RECOMPUTED]] if RECOMPUTED in d.files else []
            tensors = {k: torch.from_numpy(d[k].copy()) for k in d.files if k not in meta and k != RECOMPUTED}
        for name in skip:
            prefix, hook = name.rsplit(".", 1)
            tensors[name] = getattr(recompute(tensors, prefix), DERIVED[hook])
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
