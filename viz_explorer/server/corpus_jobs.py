"""Corpus results computed once: kept on disk for every session and every later server, and the one job that
computes each, whichever sessions ask for it meanwhile.

A result's key is the sha256 of what it is computed from: its kind, the model's weights (meta.json's weights_sha256,
else the weight files hashed once per process), the corpus's texts and the settings. Its file is JSON (a pandas table
in "split" form, never a pickle) under <VIZ_DATA>/corpus/ (VIZ_DATA as the database's: data/ beside app.py), written
whole or not at all; the folder is kept under VIZ_RESULTS_MB (default 64), oldest first. A file that does not read is
logged, removed and computed again.

A job runs in a thread of its own: `start` returns the running job for a key rather than a second one, its progress
(done, total, seconds left) is read by every page that asks, and `cancel` stops it after the text at hand (nothing is
kept). One finished job per key is remembered for its error, until it is started again. With VIZ_RAY_ADDRESS set, a
job whose page gives its Ray form runs on that cluster (run/ray_pool.py: the same result); a Ray that does not answer
is logged, said on the page in one line, and the job runs here instead.
"""
from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pandas as pd

from viz_explorer.server import data_folder, env_sizes, model_key
from viz_transformer.run.ray_pool import RayUnavailable

log = logging.getLogger("viz_transformer.app")
RESULTS_MB = 64.0
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt")


def folder() -> Path:
    return data_folder.folder() / "corpus"


def limit_bytes(environ=os.environ) -> int:
    """VIZ_RESULTS_MB in bytes (env_sizes: garbage is logged, the default holds)."""
    return env_sizes.mib_bytes("VIZ_RESULTS_MB", RESULTS_MB, environ)


_weights: dict[tuple, str] = {}         # (folder, newest file time) -> the weights' digest, hashed once per process
_weights_lock = threading.Lock()


def weights_id(path, stamp: float) -> str:
    """What identifies a checkpoint's weights: meta.json's weights_sha256 when it records one, else the sha256 of its
    weight files (hashed once per folder and file time in this process)."""
    path = Path(path)
    with _weights_lock:
        if (str(path), stamp) in _weights:
            return _weights[(str(path), stamp)]
        meta = path / "meta.json"
        try:
            known = json.loads(meta.read_text(encoding="utf-8")).get("weights_sha256") if meta.is_file() else None
        except (OSError, ValueError):
            known = None
        if not known:
            h = hashlib.sha256()
            for f in sorted(p for pattern in WEIGHT_FILES for p in path.glob(pattern)):
                with open(f, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        h.update(block)
            known = h.hexdigest()
        _weights[(str(path), stamp)] = known
        return known


def result_key(kind: str, path, stamp: float, texts: list[str], settings: dict) -> str:
    """The key of a corpus result: kind, the weights (and the language pair a multilingual model is read with: the
    app's model key, server/model_key.py), the texts and the settings (JSON-able), hashed."""
    corpus = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
    pair = model_key.pair_of(str(path))
    what = json.dumps([kind, weights_id(model_key.folder_of(str(path)), stamp), pair, corpus, settings],
                      sort_keys=True, default=str)
    return hashlib.sha256(what.encode("utf-8")).hexdigest()


def _file(key: str) -> Path:
    return folder() / f"{key}.json"


def load(key: str) -> Optional[pd.DataFrame]:
    """The result kept on disk under key, or None; a file that does not read is logged and removed."""
    f = _file(key)
    if not f.is_file():
        return None
    try:
        df = pd.read_json(io.StringIO(f.read_text(encoding="utf-8")), orient="split")
        os.utime(f)                                  # used: the last to go when the folder is trimmed
        return df
    except (OSError, ValueError) as e:
        log.warning("corpus result %s does not read (%s): removed, it will be computed again", f.name, e)
        f.unlink(missing_ok=True)
        return None


def save(key: str, df: pd.DataFrame) -> None:
    """Write the result whole (a temporary file renamed), then trim the folder to its limit, oldest first. A folder
    that cannot be written is logged: the result then lives in memory only."""
    try:
        folder().mkdir(parents=True, exist_ok=True)
        tmp = _file(key).with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(df.to_json(orient="split"), encoding="utf-8")
        os.replace(tmp, _file(key))
        trim(limit_bytes())
    except OSError as e:
        log.warning("corpus result not kept on disk (%s): it lives in this process only", e)


def trim(limit: int) -> None:
    files = sorted(folder().glob("*.json"), key=lambda p: p.stat().st_mtime)
    total = sum(p.stat().st_size for p in files)
    for p in files:
        if total <= limit:
            break
        total -= p.stat().st_size
        p.unlink(missing_ok=True)


class Cancelled(Exception):
    """Raised in a job's thread by its progress callback once the job is cancelled."""


@dataclass
class Job:
    key: str
    total: int
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    stop: threading.Event = field(default_factory=threading.Event)
    finished: bool = False
    error: Optional[str] = None
    cancelled: bool = False
    where: Optional[str] = None              # the Ray cluster's address while the job runs there
    fell_back: Optional[str] = None          # why Ray was not used (it did not answer): the job ran here
    result: Optional[pd.DataFrame] = None    # held until the disk has it or the job is started again

    def seconds_left(self) -> Optional[float]:
        """An estimate from the texts done so far (None before the first)."""
        if self.done <= 0:
            return None
        return (time.monotonic() - self.started) / self.done * (self.total - self.done)

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self.stop.is_set():
            raise Cancelled()


_jobs: dict[str, Job] = {}
_lock = threading.Lock()


def job(key: str) -> Optional[Job]:
    with _lock:
        return _jobs.get(key)


def running() -> list[Job]:
    """The jobs not finished yet."""
    with _lock:
        return [j for j in _jobs.values() if not j.finished]


def result(key: str) -> Optional[pd.DataFrame]:
    """The result under key: on disk, else held by its finished job, else None."""
    df = load(key)
    j = job(key)
    return df if df is not None else (j.result if j is not None and j.finished else None)


def ray_address(environ=os.environ) -> Optional[str]:
    """VIZ_RAY_ADDRESS: the Ray cluster corpus jobs run on (`ray://head:10001`, or `auto` for the cluster this
    machine is part of); unset or blank: here, in the server's process."""
    return environ.get("VIZ_RAY_ADDRESS", "").strip() or None


def ray_form(fn: Callable, path: str, *args, **kwargs) -> Optional[Callable]:
    """A job's Ray form for `start`: fn(the checkpoint's folder, *args, address=, workers=, progress=, **kwargs), or
    None for a model Ray workers cannot load by its folder alone (a multilingual one read with a language pair)."""
    if model_key.pair_of(path) is not None:
        return None
    return functools.partial(fn, model_key.folder_of(path), *args, **kwargs)


def start(key: str, total: int, compute: Callable[[Callable[[int, int], None]], pd.DataFrame],
          on_ray: Optional[Callable] = None) -> Job:
    """The job computing key: the running one if there is, else a new thread running compute(progress) (or, with
    VIZ_RAY_ADDRESS set, on_ray(address=, workers=None, progress=): every CPU of that cluster), whose result is
    saved when it ends (and held by the job: a folder that cannot be written loses nothing)."""
    with _lock:
        running = _jobs.get(key)
        if running is not None and not running.finished:
            return running
        j = _jobs[key] = Job(key, total)
    address = ray_address() if on_ray is not None else None

    def work() -> None:
        try:
            if address:
                j.where = address
                try:
                    j.result = on_ray(address=address, workers=None, progress=j.progress)
                except RayUnavailable as e:
                    log.warning("corpus job %s runs here: %s", key[:12], e)
                    j.where, j.fell_back, j.done, j.started = None, str(e), 0, time.monotonic()
                    j.result = compute(j.progress)
            else:
                j.result = compute(j.progress)
            save(key, j.result)
        except Cancelled:
            j.cancelled = True
        except Exception as e:                          # noqa: BLE001  (said on the page; the server goes on)
            log.exception("corpus job %s failed", key[:12])
            j.error = str(e) or type(e).__name__
        finally:
            j.finished = True
    threading.Thread(target=work, name=f"corpus-{key[:12]}", daemon=True).start()
    return j


def forget_finished() -> None:
    """Drop the finished jobs (their errors, the results they hold): what a restarted server has."""
    with _lock:
        for key in [k for k, j in _jobs.items() if j.finished]:
            del _jobs[key]


def cancel(key: str) -> None:
    j = job(key)
    if j is not None:
        j.stop.set()
