"""What the Overview says about the default model, recomputed from its files: the layer and head counts of the
diagram's title from config.json, the parameter count from the weights' shapes (safetensors header), in both
languages (docs/library.md lists every such statement and its test)."""
from __future__ import annotations

import json

import pytest
from safetensors import safe_open

from app_util import ROOT, figures, open_app
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH as ZH_STRINGS
from viz_explorer.server.defaults import CHECKPOINT

FOLDER = ROOT / "checkpoints" / CHECKPOINT


@pytest.mark.parametrize("lang,table", [(None, EN), ("zh", ZH_STRINGS)])
def test_the_overview_counts_layers_heads_and_parameters_from_the_files(monkeypatch, lang, table):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    cfg = json.loads((FOLDER / "config.json").read_text())
    with safe_open(str(FOLDER / "model.safetensors"), "pt") as f:
        n_params = sum(_prod(f.get_slice(k).get_shape()) for k in f.keys())
    at = open_app(ckpt=CHECKPOINT, text="我是一名工程师。", lang=lang)
    layers = table["sidebar.layers_ed"].format(enc=cfg["n_encoder_layers"], dec=cfg["n_decoder_layers"])
    titles = [f["layout"]["title"]["text"] for f in figures(at) if f["layout"].get("title")]
    assert any(layers in t_ and f"{cfg['n_heads']}" in t_ for t_ in titles), titles
    shown = {m.label: m.value for m in at.metric}
    assert shown[table["ov.m.params"]] == f"{n_params:,}"


def _prod(shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out
