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
    train_loss): the page names them. The test split is preferred for scores; the epoch and training loss are
    the validation record's (the epoch that shipped)."""
    out: dict[str, float] = {}
    for k, key in (("params", "n_params"), ("items", "train_items"), ("seconds", "train_seconds")):
        if isinstance(meta.get(key), (int, float)):
            out[k] = meta[key]
    for split in ("test", "val"):
        d = meta.get(split)
        if isinstance(d, dict):
            for k in ("bleu", "chrf", "perplexity", "loss"):
                if isinstance(d.get(k), (int, float)) and not any(x.endswith("_" + k) for x in out):
                    out[f"{split}_{k}"] = d[k]
    val = meta.get("val") if isinstance(meta.get("val"), dict) else {}
    for k, key in (("epoch", "epoch"), ("train_loss", "train_loss")):
        if isinstance(val.get(key), (int, float)):
            out[k] = val[key]
    return out
