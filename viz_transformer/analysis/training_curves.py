"""What a checkpoint's meta.json says about its training, for the Overview: the facts worth showing, the
loss at each epoch, the headline scores. Plain dicts in, plain dicts and lists out."""
from __future__ import annotations



def training_summary(meta: dict) -> dict:
    """The facts of meta.json a reader cares about (what data, how long, how good)."""
    keep = ("task", "data", "trained_at", "train_items", "n_params", "train_seconds", "val", "test", "demo")
    return {k: meta[k] for k in keep if k in meta and meta[k] is not None}


def epoch_curve(meta: dict) -> list[tuple[int, float]]:
    """meta.json's training loss at the end of each epoch, [(step, train_loss), ...] (train.py records it in
    meta["curve"] with the validation scores); [] when none is recorded."""
    curve = meta.get("curve") if isinstance(meta.get("curve"), list) else []
    return [(h["step"], h["train_loss"]) for h in curve if isinstance(h, dict)
            and isinstance(h.get("step"), (int, float)) and isinstance(h.get("train_loss"), (int, float))]


def headline_metrics(summary: dict) -> dict[str, str]:
    """A few numbers worth a glance: test (else validation) BLEU/chrF or loss, and the epoch."""
    out = {}
    for split in ("test", "val"):
        d = summary.get(split)
        if isinstance(d, dict):
            for k in ("bleu", "chrf", "loss", "perplexity", "epoch"):
                if k in d and isinstance(d[k], (int, float)):
                    out[f"{split} {k}"] = f"{d[k]:g}"
            break
    return out


def training_metrics(meta: dict) -> dict[str, float]:
    """meta.json's numbers by a stable key (params, items, seconds, epoch, {test,val}_{bleu,chrf,perplexity,loss},
    a masked LM's {test,val}_top{1,5}_{zh,en} fill-in accuracies (fractions), train_loss): the page names them. The
    test split is preferred for scores; the epoch and training loss are the validation record's (the epoch that
    shipped)."""
    out: dict[str, float] = {}
    for k, key in (("params", "n_params"), ("items", "train_items"), ("seconds", "train_seconds")):
        if isinstance(meta.get(key), (int, float)):
            out[k] = meta[key]
    for split in ("test", "val"):
        d = meta.get(split)
        if isinstance(d, dict):
            for k in ("bleu", "chrf", "perplexity", "loss", "top1_zh", "top5_zh", "top1_en", "top5_en"):
                if isinstance(d.get(k), (int, float)) and not any(x.endswith("_" + k) for x in out):
                    out[f"{split}_{k}"] = d[k]
    val = meta.get("val") if isinstance(meta.get("val"), dict) else {}
    for k, key in (("epoch", "epoch"), ("train_loss", "train_loss")):
        if isinstance(val.get(key), (int, float)):
            out[k] = val[key]
    return out


def _updates(record: dict) -> int:
    """The updates a run's shipped weights had of their own: its validation record's step (the step that shipped)."""
    val = record.get("val") if isinstance(record.get("val"), dict) else {}
    step = val.get("step")
    return int(step) if isinstance(step, (int, float)) else 0


def _run_name(record: dict, known: dict[str, str]) -> tuple[str, bool]:
    """(name, shipped): the listed checkpoint whose weights have the record's checksum, else its folder's name."""
    sha = record.get("weights_sha256")
    if sha in known:
        return known[sha], True
    return str(record.get("checkpoint", "?")).rstrip("/").rsplit("/", 1)[-1], False


def playback_origin(meta: dict, known: dict[str, str] | None = None) -> dict:
    """Where a training run's step 0 stands, from meta.json's `init_from` record (train.base_record): random
    weights, or the weights of the run(s) it fine-tunes. `known` maps a weights checksum to a listed checkpoint's
    name, so an ancestor that ships is named as the app lists it.

    Returns {"from_scratch": bool, "updates": total updates before step 0, "base": the run it starts from,
    "chain": [{"name", "updates", "shipped"}, ...] oldest first}."""
    known = known or {}
    chain, record = [], meta.get("init_from")
    if not isinstance(record, dict):
        init = (meta.get("train_config") or {}).get("init_from") if isinstance(meta.get("train_config"), dict) else None
        if not init:
            return {"from_scratch": True, "updates": 0, "base": None, "chain": []}
        record = {"checkpoint": init}               # an old record: the path only, its updates unknown
    while isinstance(record, dict):
        name, shipped = _run_name(record, known)
        chain.append({"name": name, "updates": _updates(record), "shipped": shipped})
        record = record.get("init_from")
    chain.reverse()
    return {"from_scratch": False, "updates": sum(c["updates"] for c in chain), "base": chain[-1]["name"],
            "chain": chain}
