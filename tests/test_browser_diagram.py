"""The architecture diagram as Chromium draws it (plotly.js from the installed plotly, no server): at the width a
1366×768 laptop gives the Overview's diagram, at a phone's (each column of blocks a figure of its own, fitted to the
phone's column: an encoder-decoder's encoder, then its decoder) and at a projector's, every label stays inside the
figure (the title too), a block's label inside its block, no two labels overlap and no label lies across the encoder's line to
the decoder, for short and long texts, every kind of model and both languages' labels."""
from __future__ import annotations

from pathlib import Path

import plotly
import pytest

from viz_explorer.kit.strings import EN, fill, plurals
from viz_explorer.kit.strings_zh import ZH
from viz_transformer.core.config import ModelConfig
from viz_transformer.plots import diagram, figure_rules

pytestmark = pytest.mark.browser

ED = dict(architecture="encoder_decoder", n_encoder_layers=3, n_decoder_layers=3, n_heads=8, d_model=256, d_ff=1024,
          vocab_size=8000)
CASES = {    # name: (config, source length, target length)
    "translator, the tutorial's sentence": (ModelConfig(**ED), 9, 7),
    "translator, 120 pieces": (ModelConfig(**ED), 120, 19),
    "translator, 512 pieces both sides": (ModelConfig(**ED), 512, 512),
    "T5-like, relative positions": (ModelConfig(**{**ED, "positional": "relative", "n_heads": 12, "d_model": 768,
                                                   "d_ff": 3072, "vocab_size": 32128}), 300, 24),
    "Qwen2.5-0.5B-sized, 2,048 pieces": (ModelConfig(architecture="decoder_only", n_encoder_layers=0,
                                                     n_decoder_layers=24, n_heads=14, d_model=896, d_ff=4864,
                                                     vocab_size=151936, positional="rope", norm_type="rms",
                                                     ffn="gated", activation="silu", scale_embeddings=False), None, 2048),
    "prefix decoder": (ModelConfig(architecture="prefix_lm", n_encoder_layers=0, n_decoder_layers=3, n_heads=8,
                                   d_model=256, d_ff=1024, vocab_size=8000), None, 140),
    "BERT-like": (ModelConfig(architecture="encoder_only", n_encoder_layers=12, n_decoder_layers=0, n_heads=12,
                              d_model=768, d_ff=3072, vocab_size=30522, positional="learned", type_vocab_size=2,
                              embed_norm=True, head="mlm", norm="post", activation="gelu"), 512, 512),
}
WIDTHS = {"laptop": 642, "phone": figure_rules.PHONE_PX, "projector": 1100}    # the column's width in px

# Boxes of what Chromium drew, by layout index: every annotation's text, every shape.
BOXES = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const ann = {}, shp = {};
  document.querySelectorAll('g.annotation').forEach(g => {
    const t = g.querySelector('.annotation-text-g text');
    if (t && t.textContent.trim()) ann[g.getAttribute('data-index')] = box(t);
  });
  document.querySelectorAll('.shapelayer path[data-index]').forEach(p => {
    shp[p.getAttribute('data-index')] = {box: box(p), d: p.getAttribute('d')};
  });
  const title = document.querySelector('.g-gtitle text');
  return {svg: box(document.querySelector('.main-svg')), ann, shp, title: title ? box(title) : null};
}"""


def title(table: dict, cfg: ModelConfig) -> str:
    """The title the Overview gives the diagram (viz_explorer/kit/overview_head.py), from one language's table."""
    layers = (fill(table["sidebar.layers_ed"], enc=cfg.n_encoder_layers, dec=cfg.n_decoder_layers)
              if cfg.is_encoder_decoder else fill(table["sidebar.layers_d"], dec=cfg.n_decoder_layers))
    return fill(table["ov.diagram_title"], arch=table["ov.arch." + cfg.architecture], layers=layers,
                heads=cfg.n_heads, d_model=cfg.d_model, norm=table["ov.norm_short." + cfg.norm])


def labels(table: dict, cfg: ModelConfig) -> dict:
    """The labels the Overview passes (viz_explorer/kit/overview_head.py), from one language's table."""
    out = {k: plurals(table["dg." + k], h=cfg.n_heads) for k in diagram.LABELS if "dg." + k in table}
    out.update({f"pos.{k}": table[f"pe.kind.{k}"] for k in ("sinusoidal", "learned")})
    return out


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright
    from browser_util import ARGS, CHROMIUM
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing")
    script = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1200, "height": 1200})
        pg.set_content(f"<html><body style='margin:0'><script>{script}</script><div id=d></div></body></html>")
        yield pg
        browser.close()


def drawn(pg, fig) -> dict:
    pg.evaluate("f => Plotly.react('d', f.data, f.layout)", fig.to_plotly_json())
    return pg.evaluate(BOXES)


def inside(a, b, slack=1.0) -> bool:
    return a[0] >= b[0] - slack and a[1] >= b[1] - slack and a[2] <= b[2] + slack and a[3] <= b[3] + slack


def overlap(a, b, slack=0.5) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def segments(d: str) -> list[tuple[float, float, float, float]]:
    """The straight segments of an SVG path drawn with M and L only (the memory line), in px."""
    pts = [tuple(map(float, p.split(","))) for p in d.replace("M", " ").replace("L", " ").split()]
    return [(x0, y0, x1, y1) for (x0, y0), (x1, y1) in zip(pts, pts[1:])]


def crosses(box, seg) -> bool:
    """An axis-aligned segment passes through a box's inside (not along its edge)."""
    x0, y0, x1, y1 = seg
    return (max(box[0], min(x0, x1)) < min(box[2], max(x0, x1)) or x0 == x1 and box[0] < x0 < box[2]) and \
           (max(box[1], min(y0, y1)) < min(box[3], max(y0, y1)) or y0 == y1 and box[1] < y0 < box[3])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_label_fits_where_it_belongs(chromium, lang):
    problems = []
    for case, (cfg, src, tgt) in CASES.items():
        table = EN if lang == "en" else ZH
        for screen, column in WIDTHS.items():
            # a phone draws an encoder-decoder's columns as two figures, each as wide as the phone's column
            fit_px, parts = diagram.narrow_layout(cfg, column) if screen == "phone" else (diagram.FIT_PX, (None,))
            for part in parts:
                problems += _problems(chromium, table, cfg, src, tgt, fit_px, part, column,
                                      f"{case}, {screen} ({column} px{', ' + part if part else ''})")
    assert not problems, "\n".join(problems[:30])


def _problems(chromium, table, cfg, src, tgt, fit_px, part, width, where) -> list[str]:
    """What is wrong with one figure of the diagram drawn `width` px wide."""
    problems = []
    fig = diagram.architecture_diagram(cfg, src, tgt, labels(table, cfg), title(table, cfg), fit_px, part)
    names = {a.name: i for i, a in enumerate(fig.layout.annotations) if a.name}
    rects = {s.name: i for i, s in enumerate(fig.layout.shapes) if s.name and s.type == "rect"}
    memory = next((i for i, s in enumerate(fig.layout.shapes) if s.name == "memory"), None)
    fig.layout.width = width
    got = drawn(chromium, fig)
    ann = {int(i): b for i, b in got["ann"].items()}
    if not inside(got["title"], got["svg"]):
        problems.append(f"{where}: the title past the figure's edge {got['title']}")
    for i, b in ann.items():
        if not inside(b, got["svg"]):
            problems.append(f"{where}: {fig.layout.annotations[i].name or i} past the figure's edge {b}")
    for block in fig.layout.meta["blocks"]:
        b, r = ann[names[block]], got["shp"][str(rects[block])]["box"]
        if not inside(b, r):
            problems.append(f"{where}: the label of {block} is wider or taller than its block ({b} in {r})")
    for i, a in ann.items():
        problems += [f"{where}: {fig.layout.annotations[i].name} overlaps {fig.layout.annotations[j].name}"
                     for j, b in ann.items() if j > i and overlap(a, b)]
    if memory is not None:
        line = segments(got["shp"][str(memory)]["d"])
        problems += [f"{where}: the encoder's line crosses {fig.layout.annotations[i].name}"
                     for i, b in ann.items() if any(crosses(b, s) for s in line)]
    return problems
