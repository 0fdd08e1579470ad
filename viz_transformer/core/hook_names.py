"""Capture names, built in one place: "{part}.{layer}.{module}.{hook}".

Every caller (cache stacking, decoding traces, analysis, pages) formats names through here,
so the strings in code, docs, tests and UI labels cannot drift apart.
"""
from __future__ import annotations

import torch

# An attention block kind -> (part, attention module); "{part}.{layer}.{attn}" is its capture prefix.
BLOCKS = {"encoder.self_attn": ("encoder", "self_attn"),
          "decoder.self_attn": ("decoder", "self_attn"),
          "decoder.cross_attn": ("decoder", "cross_attn")}


def layer_name(part: str, layer: int, name: str) -> str:
    """("decoder", 1, "self_attn.hook_pattern") -> "decoder.1.self_attn.hook_pattern"."""
    return f"{part}.{layer}.{name}"


def hook_name(block: str, layer: int, hook: str) -> str:
    """("decoder.cross_attn", 1, "hook_pattern") -> "decoder.1.cross_attn.hook_pattern"."""
    part, attn = BLOCKS[block]
    return layer_name(part, layer, f"{attn}.{hook}")


def available_blocks(cfg) -> list[str]:
    """The attention blocks this architecture has, in reading order."""
    if getattr(cfg, "architecture", None) == "encoder_only":        # a cfg-like may name only is_encoder_decoder
        return ["encoder.self_attn"]
    return list(BLOCKS) if cfg.is_encoder_decoder else ["decoder.self_attn"]


def n_layers(cfg, block: str) -> int:
    return cfg.n_encoder_layers if BLOCKS[block][0] == "encoder" else cfg.n_decoder_layers


def decoder_blocks(cfg) -> list[str]:
    """The attention blocks a new decoder token's query runs through."""
    return [b for b in available_blocks(cfg) if BLOCKS[b][0] == "decoder"]


def block_prefix(block: str, layer: int) -> str:
    """("encoder.self_attn", 0) -> "encoder.0.self_attn": the prefix of that block's hooks."""
    part, attn = BLOCKS[block]
    return layer_name(part, layer, attn)


def parse_prefix(prefix: str) -> tuple[str, int]:
    """"decoder.2.cross_attn" -> ("decoder.cross_attn", 2); ValueError for anything else."""
    parts = prefix.split(".")
    if len(parts) == 3 and parts[1].isdigit() and f"{parts[0]}.{parts[2]}" in BLOCKS:
        return f"{parts[0]}.{parts[2]}", int(parts[1])
    raise ValueError(f"{prefix!r} is not an attention block prefix such as 'encoder.0.self_attn'")


def per_head(df, block: str, column: str, layers: int, heads: int) -> torch.Tensor:
    """One column of a per-head table (head statistics, a head ranking, patching scores) as [layer, head]
    for one block kind ("decoder.cross_attn"); NaN where the table has no row. The table's `block` is the
    kind or a layer's prefix ("decoder.1.cross_attn"); its `layer` and `head` say where the row goes."""
    grid = torch.full((layers, heads), float("nan"))
    for b, layer, head, v in zip(df["block"], df["layer"], df["head"], df[column]):
        if (b if b in BLOCKS else parse_prefix(b)[0]) == block:
            grid[int(layer), int(head)] = float(v)
    return grid
