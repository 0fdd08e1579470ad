"""One self-contained HTML report of a run: tokens, model view, chosen heads, rollout, output, decoding steps.

Opens offline (Plotly's JS inlined once, no CDN). Every text, the user's included, reaches the page
as JSON and is put in with textContent, never parsed as HTML.

    html = build_report(hm, hm.run("我是一名工程师。"))
"""
from __future__ import annotations

import datetime as _dt
import html as _html
import json
from typing import Optional, Sequence

import base64

import numpy as np
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.utils import PlotlyJSONEncoder

from viz_transformer.analysis import patterns, piece_labels
from viz_transformer.analysis import summaries
from viz_transformer.core.hook_names import available_blocks, n_layers
from viz_transformer.plots import figure_rules
from viz_transformer.plots.numbers import fmt_prob
from viz_transformer.plots.heatmaps import attention_heatmap, model_view
from viz_transformer.plots.summary_figures import relevance_heatmap

TILE = 16          # model-view tiles are max-pooled to at most TILE × TILE cells in the report
MAX_STEPS_SHOWN = 5
BITS = 8           # attention weights are sent to 1/254 (see quantize)
TEMPLATE = "plotly_white"   # the one template plots.py uses: sent once, not once per figure

TEXT = {
    "title": "viz_transformer report",
    "made": "{model} ({arch}), made {when} by viz_transformer.",
    "input": "Input text",
    "output.translator": "Translation (greedy)",
    "output.lm": "Continuation (greedy)",
    "tokens": "Tokens",
    "tokens.encoder": "Encoder input (source pieces)",
    "tokens.decoder": "Decoder input",
    "figures": "Attention",
    "model_view": "{block}: all layers × heads",
    "model_view.help": "Each tile is one head's pattern (rows = queries, columns = keys), shrunk to at most "
                       "{tile}×{tile} cells (each cell = the max of its block). One colour scale for all tiles.",
    "head": "{block}, layer {layer}, head {head}",
    "head.help": "Row = query (the token that looks), column = key (the token looked at). Each row sums to 1. "
                 "Weights in this report are stored to 1/254 and shown to 2 decimals; the app and "
                 "`python -m viz_transformer trace --out run.npz` give the exact values.",
    "head.help.decoder": " A decoder row is the step that predicts the next token, labelled with its input and the "
                         "token the model predicts there: the row {row} is where the model chose {piece}.",
    "rollout.attribution": "Source attribution: each target token over the source pieces",
    "rollout.decoder": "Attention rollout of the decoder (rows = queries, columns = keys)",
    "rollout.encoder": "Attention rollout of the encoder (rows = queries, columns = keys)",
    "rollout.help": "Rollout (Abnar & Zuidema 2020): each layer's mean over heads, half mixed with the identity "
                    "(the residual stream), rows renormalised, multiplied through the layers; attribution = the "
                    "last decoder layer's mean cross-attention × the encoder rollout. A summary of where "
                    "information may flow, not an explanation of the output (Jain & Wallace 2019).",
    "steps": "Decoding steps",
    "steps.help": "Greedy decoding: at each step the model's most likely next piece and the runners-up.",
    "steps.none": "No decoding steps: this run was teacher-forced on a given target.",
    "col.pos": "pos", "col.piece": "piece", "col.id": "id", "col.step": "step", "col.chosen": "chosen",
    "col.prob": "probability", "col.candidates": "top candidates",
    "block.encoder.self_attn": "encoder self-attention",
    "block.decoder.self_attn": "decoder self-attention",
    "block.decoder.cross_attn": "cross-attention (decoder → encoder)",
    "axis.query": "query (attending)", "axis.query_next": "query → prediction", "axis.key": "key (attended to)", "axis.layer": "layer", "axis.head": "head",
}

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; padding: 0 1rem; color: #222; }}
pre {{ background: #f4f4f4; padding: .6rem; white-space: pre-wrap; }}
table {{ border-collapse: collapse; font-size: .85rem; margin: .3rem 0 1rem; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: left; }}
.help {{ color: #555; font-size: .9rem; }} .scroll {{ max-height: 420px; overflow: auto; display: inline-block; }}
.figure {{ margin-bottom: 1.5rem; }}
</style>
<script type="text/javascript">{plotlyjs}</script>
</head><body>
<h1 id="title"></h1><p class="help" id="made"></p>
<main id="report"></main>
<script type="application/json" id="report-data">{data}</script>
<script>
(function () {{
  const D = JSON.parse(document.getElementById("report-data").textContent);
  const main = document.getElementById("report");
  function el(tag, text, cls) {{ const e = document.createElement(tag); if (text != null) e.textContent = text;
    if (cls) e.className = cls; return e; }}
  function table(cols, rows) {{ const w = el("div", null, "scroll"), t = el("table"), h = el("tr");
    cols.forEach(c => h.appendChild(el("th", c))); t.appendChild(h);
    rows.forEach(r => {{ const tr = el("tr"); r.forEach(v => tr.appendChild(el("td", String(v)))); t.appendChild(tr); }});
    w.appendChild(t); return w; }}
  function unpack(q) {{ // see viz_transformer.report.quantize: u / scale, scale + 1 = NaN
    const bin = atob(q.bdata), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const u = q.bits === 16 ? new Uint16Array(bytes.buffer) : bytes, [R, C] = q.shape, z = [];
    for (let r = 0; r < R; r++) {{ const row = new Array(C);
      for (let c = 0; c < C; c++) {{ const v = u[r * C + c]; row[c] = v === q.scale + 1 ? null : v / q.scale; }}
      z.push(row); }}
    return z; }}
  document.getElementById("title").textContent = D.title;
  document.getElementById("made").textContent = D.made;
  D.sections.forEach(s => {{
    main.appendChild(el("h2", s.heading));
    if (s.help) main.appendChild(el("p", s.help, "help"));
    (s.blocks || []).forEach(b => {{
      if (b.kind === "text") {{ if (b.heading) main.appendChild(el("h3", b.heading)); main.appendChild(el("pre", b.text)); }}
      else if (b.kind === "table") {{ if (b.heading) main.appendChild(el("h3", b.heading));
        main.appendChild(table(b.columns, b.rows)); }}
      else if (b.kind === "figure") {{ const d = el("div", null, "figure"); main.appendChild(d);
        if (b.help) main.insertBefore(el("p", b.help, "help"), d);
        b.figure.data.forEach(tr => {{ if (tr.zq) {{ tr.z = unpack(tr.zq); delete tr.zq; }} }});
        b.figure.layout.template = D.template;
        Plotly.newPlot(d, b.figure.data, b.figure.layout, {{displaylogo: false, responsive: true}}); }}
    }});
  }});
  document.body.dataset.figures = String(document.querySelectorAll(".figure").length);
}})();
</script>
</body></html>
"""


def quantize(z, bits: int = BITS) -> dict:
    """A [R, C] matrix of weights in [0, 1] (NaN allowed) as unsigned ints, base64: value = u / scale,
    u = scale + 1 for NaN. At 8 bits a cell costs 1.3 bytes (base64 float32: 5.3, a JSON decimal 4 to 8)
    and is exact to 1/254 ≈ 0.004: what keeps a report of 128-token patterns under 5 MB."""
    z = np.asarray(z, dtype=np.float64)
    finite = z[np.isfinite(z)]
    if finite.size and (finite.min() < -1e-6 or finite.max() > 1 + 1e-6):
        raise ValueError(f"only weights in [0, 1] can be packed, not {finite.min():g} … {finite.max():g}")
    dtype = {8: "<u1", 16: "<u2"}[bits]
    scale = 2 ** bits - 2
    u = np.where(np.isfinite(z), np.round(np.clip(z, 0, 1) * scale), scale + 1).astype(dtype)
    return {"bits": bits, "scale": scale, "shape": list(z.shape), "bdata": base64.b64encode(u.tobytes()).decode()}


def unquantize(q: dict) -> np.ndarray:
    """The inverse of quantize (what the report's script does in the browser)."""
    u = np.frombuffer(base64.b64decode(q["bdata"]), dtype={8: "<u1", 16: "<u2"}[q["bits"]]).reshape(q["shape"])
    return np.where(u == q["scale"] + 1, np.nan, u / q["scale"])


def _figure(fig) -> dict:
    """Plotly JSON of a figure with each heatmap's z packed (see quantize; hover then shows the two
    decimals it holds) and the template left out (the report sends it once)."""
    packed = {}
    for i, tr in enumerate(fig.data):
        if tr.type == "heatmap" and tr.z is not None:
            packed[i] = quantize(tr.z)
            tr.z = None
            if tr.hovertemplate:
                tr.hovertemplate = tr.hovertemplate.replace("%{z:.4f}", "%{z:.2f}")
    d = json.loads(pio.to_json(fig, validate=False))
    d["layout"].pop("template", None)
    for i, q in packed.items():
        d["data"][i]["zq"] = q
    return d


def _tokens_table(ids, pieces) -> dict:
    return {"kind": "table", "columns": [TEXT["col.pos"], TEXT["col.piece"], TEXT["col.id"]],
            "rows": [[i, p, int(x)] for i, (p, x) in enumerate(zip(pieces, ids))]}


def default_heads(cfg) -> list[tuple[str, int, int]]:
    """Head 0 of the last layer of every attention block."""
    return [(b, n_layers(cfg, b) - 1, 0) for b in available_blocks(cfg)]


def report_data(hm, run, heads: Optional[Sequence[tuple[str, int, int]]] = None, trace=None,
                when: Optional[str] = None) -> dict:
    """Everything the report shows, as plain JSON-able data (figures as Plotly JSON), laid out for a desktop
    whatever screen asked for it (a standalone document, and the app keeps one for every session)."""
    with figure_rules.screen(figure_rules.FIGURE_PX):
        return _report_data(hm, run, heads, trace, when)


def _report_data(hm, run, heads, trace, when) -> dict:
    cfg = hm.cfg
    heads = list(default_heads(cfg) if heads is None else heads)
    trace = run.trace if trace is None else trace
    kind = "translator" if cfg.is_translator else "lm"
    block_name = lambda b: TEXT[f"block.{b}"]                              # noqa: E731
    secs = [{"heading": TEXT["input"], "blocks": [{"kind": "text", "text": run.text},
                                                    {"kind": "text", "heading": TEXT[f"output.{kind}"],
                                                     "text": run.output}]}]
    toks = []
    if run.src_ids is not None:
        toks.append({**_tokens_table(run.src_ids, run.src_pieces), "heading": TEXT["tokens.encoder"]})
    toks.append({**_tokens_table(run.tgt_ids, run.tgt_pieces), "heading": TEXT["tokens.decoder"]})
    secs.append({"heading": TEXT["tokens"], "blocks": toks})
    figs = []
    for b in available_blocks(cfg):
        pats = patterns.block_patterns(run.cache, b)
        fig = model_view(patterns.model_view_tiles(pats, TILE), TEXT["model_view"].format(block=block_name(b)),
                         TEXT["axis.layer"], TEXT["axis.head"], hover="")
        figs.append({"kind": "figure", "help": TEXT["model_view.help"].format(tile=TILE), "figure": _figure(fig)})
    example = (piece_labels.example_row(run.tgt_pieces, run.predicted, run.prompt_len - 1) if run.tgt_pieces
               else ("", ""))                                              # an encoder-only model: no decoder rows
    for b, layer, h in heads:
        q, k = piece_labels.query_labels(run, b), piece_labels.block_pieces(run, b)[1]      # a decoder row: "▁an → ▁engineer"
        pat = patterns.block_patterns(run.cache, b)[layer, h]
        dec = b != "encoder.self_attn"
        fig = attention_heatmap(pat, q, k, TEXT["head"].format(block=block_name(b), layer=layer, head=h),
                                TEXT["axis.key"], TEXT["axis.query_next" if dec else "axis.query"])
        help_ = TEXT["head.help"] + (TEXT["head.help.decoder"].format(row=example[0], piece=example[1]) if dec else "")
        figs.append({"kind": "figure", "help": help_, "figure": _figure(fig)})
    block = "encoder.self_attn" if cfg.is_encoder_only else "decoder.self_attn"
    if cfg.is_encoder_only:                      # one sequence read both ways: the encoder's own rollout
        rel, k, title = summaries.rollout(run.cache, "encoder"), run.src_pieces, "rollout.encoder"
    elif cfg.is_encoder_decoder:
        rel, k, title = summaries.source_attribution(run.cache), run.src_pieces, "rollout.attribution"
    else:
        rel, k, title = summaries.rollout(run.cache, "decoder"), run.tgt_pieces, "rollout.decoder"
    q = piece_labels.query_labels(run, block)
    axis = "axis.query" if cfg.is_encoder_only else "axis.query_next"
    figs.append({"kind": "figure", "help": TEXT["rollout.help"],
                 "figure": _figure(relevance_heatmap(rel, q, k, TEXT[title], TEXT["axis.key"], TEXT[axis]))})
    secs.append({"heading": TEXT["figures"], "blocks": figs})
    if trace is not None and trace.steps:
        rows = [[s.index, s.piece, fmt_prob(s.prob),
                 ", ".join(f"{c.piece} {fmt_prob(c.prob)}" for c in s.candidates[:MAX_STEPS_SHOWN])] for s in trace.steps]
        steps = [{"kind": "table", "columns": [TEXT["col.step"], TEXT["col.chosen"], TEXT["col.prob"],
                                               TEXT["col.candidates"]], "rows": rows}]
        secs.append({"heading": TEXT["steps"], "help": TEXT["steps.help"], "blocks": steps})
    else:
        secs.append({"heading": TEXT["steps"], "help": TEXT["steps.none"]})
    when = when or _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    template = json.loads(json.dumps(pio.templates[TEMPLATE].to_plotly_json(), cls=PlotlyJSONEncoder))
    return {"title": TEXT["title"], "made": TEXT["made"].format(model=hm.name, arch=cfg.architecture, when=when),
            "template": template, "sections": secs}


def build_report(hm, run, heads: Optional[Sequence[tuple[str, int, int]]] = None, trace=None,
                 when: Optional[str] = None) -> str:
    """The report as one HTML string (≈ 4.8 MB of it is Plotly's JS, inlined once)."""
    data = json.dumps(report_data(hm, run, heads, trace, when), ensure_ascii=False, separators=(",", ":"))
    data = data.replace("<", "\\u003c")        # "</script>" in a token cannot end the data block
    return _PAGE.format(title=_html.escape(TEXT["title"]), plotlyjs=get_plotlyjs(), data=data)
