"""A training run's resumable state in its work folder: the weights, AdamW's moments and step counts, the RNG, and
the progress (state.json). Written after every epoch (the tensors through a temporary file); re-running the same command resumes from it and
ends where an uninterrupted run would. No unpickling: safetensors + JSON."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import torch
from safetensors.torch import load_file, save_file

from viz_transformer.core.checkpoint import unique_state_dict
from viz_transformer.core.config import ModelConfig


def save_state(work: Path, model, opt, info: dict) -> None:
    tensors = {f"model.{k}": v.contiguous() for k, v in unique_state_dict(model).items()}
    sd = opt.state_dict()
    for i, st in sd["state"].items():
        for k, v in st.items():
            tensors[f"opt.{i}.{k}"] = torch.as_tensor(v).detach().cpu().contiguous()
    tensors["rng"] = torch.get_rng_state()
    save_file(tensors, str(work / "state.tmp"))
    (work / "state.tmp").replace(work / "state.safetensors")
    info = dict(info, model_config=model.cfg.to_dict(),
                param_groups=[{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]])
    (work / "state.json").write_text(json.dumps(info, indent=2))


class ResumeError(ValueError):
    """The saved training state does not fit the model asked for."""


def load_state(work: Path, model, opt) -> Optional[dict]:
    """Resume from `work`, refusing (ResumeError) a state saved for another architecture or vocabulary."""
    if not (work / "state.json").exists():
        return None
    info = json.loads((work / "state.json").read_text())
    saved, wanted = info.get("model_config"), model.cfg.to_dict()
    try:            # through ModelConfig: a state saved before a field existed has its default; JSON lists are tuples
        saved = ModelConfig.from_dict(saved).to_dict() if saved else saved
    except (TypeError, ValueError):
        pass
    if saved != wanted:
        diff = sorted(k for k in wanted if (saved or {}).get(k) != wanted[k]) if saved else ["(no config saved)"]
        raise ResumeError(f"{work} holds training state for a different model ({', '.join(diff)} differ): "
                          f"delete {work} to start again, or pass the same options")
    tensors = load_file(str(work / "state.safetensors"))
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    if set(weights) != set(unique_state_dict(model)):
        raise ResumeError(f"{work / 'state.safetensors'} does not hold this model's weights: delete {work}")
    # tied copies (lm_head.weight is W_E.weight) were saved once: give each name its stored tensor
    first = {}
    full = {name: weights[first.setdefault(t.data_ptr(), name)] for name, t in model.state_dict().items()}
    model.load_state_dict(full, strict=True)
    sd = opt.state_dict()
    for i in sd["state"].keys() | {int(k.split(".")[1]) for k in tensors if k.startswith("opt.")}:
        sd["state"][i] = {k.split(".", 2)[2]: v for k, v in tensors.items() if k.startswith(f"opt.{i}.")}
    for g, saved in zip(sd["param_groups"], info["param_groups"]):
        g.update({k: v for k, v in saved.items() if k not in ("fused", "foreach")})   # the kernel is this run's
    opt.load_state_dict(sd)
    torch.set_rng_state(tensors["rng"])
    return info
