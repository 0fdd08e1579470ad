"""The architecture diagram: the classic Transformer figure drawn from a ModelConfig, with the shape of
the tensor on every arrow for one text. A pure Plotly figure (no streamlit), so a notebook can draw it:

    fig = architecture_diagram(hm.cfg, src_len=len(run.src_ids), tgt_len=len(run.tgt_ids))

Every block is a rectangle shape named "{column}:{kind}" (kinds in KINDS), listed bottom to top in
`fig.layout.meta["blocks"]`; where a block is explained in the app is `PAGE_OF[kind]`. Labels come
from the caller (translated); they are escaped here, and no user text is ever put in the figure.
"""
from __future__ import annotations

from typing import Optional

import plotly.graph_objects as go

from viz_transformer.core.config import ModelConfig
from viz_transformer.plots.figure_rules import TITLE_PX, wrap
from viz_transformer.plots.margins import text_px
from viz_transformer.plots.props import put
from viz_transformer.plots.style import escape, white

LABELS = {   # English defaults; the app passes its own (translated) table with the same keys
    "input.source": "source ids", "input.target": "[begin] + output so far", "input.sequence": "one sequence",
    "tok_embed": "Token embedding × √d_model", "tok_embed.unscaled": "Token embedding", "pos": "+ Positional encoding ({kind})",
    "pos.sinusoidal": "sinusoidal", "pos.learned": "learned", "pos.sinusoidal_halves": "sinusoidal, sines first",
    "pos.sinusoidal_fairseq": "sinusoidal, fairseq's (M2M100, NLLB)",
    "pos.rope": "none added: RoPE rotates q and k in every self-attention",
    "pos.relative": "none added: a learned bias per offset bucket and head is added to the scores",
    "pos.bias": "+ Relative position bias on the scores · {h} heads, buckets: {b}",
    "norm": "LayerNorm", "add": "⊕ Add (residual)", "add_norm": "Add & LayerNorm",
    "norm.rms": "RMSNorm", "add_norm.rms": "Add & RMSNorm", "final_norm.rms": "Final RMSNorm",
    "ffn.gated": "Gated feed-forward ({act}(gate) × up) · d_ff {d_ff}",
    "self_attn": "Multi-head self-attention · {h} heads",
    "masked_attn": "Masked multi-head self-attention · {h} heads",
    "prefix_attn": "Multi-head self-attention (prefix mask) · {h} heads",
    "cross_attn": "Cross-attention (K, V from the encoder) · {h} heads",
    "ffn": "Feed-forward ({act}) · d_ff {d_ff}",
    "final_norm": "Final LayerNorm", "linear": "Linear → vocabulary ({v})", "softmax": "Softmax → next-token probabilities",
    "encoder": "Encoder", "decoder": "Decoder", "decoder_only": "Decoder (one sequence)",
    "encoder_only": "Encoder (attention both ways)", "seg": "+ Segment embedding (sentence A / B)",
    "emb_norm": "LayerNorm (over the embeddings)", "mlm_head": "Masked-LM head: dense, {act}, LayerNorm",
    "softmax.mlm": "Softmax → the piece at each position",
    "layers": "{n}×", "heads_shape": "{h} × [{q} × {k}]",
}
KINDS = ("input", "tok_embed", "pos", "seg", "emb_norm", "norm", "self_attn", "masked_attn", "prefix_attn",
         "cross_attn", "add", "add_norm", "ffn", "final_norm", "mlm_head", "linear", "softmax")
PAGE_OF = {"tok_embed": "overview", "pos": "positional", "self_attn": "attention", "masked_attn": "masks",
           "prefix_attn": "masks", "cross_attn": "attention", "norm": "steps", "ffn": "knockout",
           "softmax": "decoding", "linear": "decoding", "seg": "attention", "emb_norm": "steps", "mlm_head": "lens"}
COLOURS = {"input": "#f2f2f2", "tok_embed": "#fde4c8", "pos": "#fde4c8", "norm": "#fff5b1", "final_norm": "#fff5b1",
           "add_norm": "#fff5b1", "add": "#ffffff", "self_attn": "#cfe2f3", "masked_attn": "#cfe2f3",
           "prefix_attn": "#cfe2f3", "cross_attn": "#d9d2e9", "ffn": "#d9ead3", "linear": "#ead1dc",
           "softmax": "#ead1dc", "seg": "#fde4c8", "emb_norm": "#fff5b1", "mlm_head": "#ead1dc"}
W, H = 4.4, 0.62           # block width, height (data units; one row = 1)
FIT_PX = 620               # the plot width labels are fitted to by default: the Overview's diagram column on a
                           # 1366×768 laptop (642 px) less the margins; wider screens draw it larger
MARGIN_PX = 10             # the figure's left and right margins
PAD = 0.15                 # data units between a label and the line beside it
TITLE_LINE_PX = round(TITLE_PX * 1.3)
TOOLBAR_W_PX = 80       # px: a phone's always-drawn toolbar over a diagram's top right (its two buttons and margin)   # a title's second line and more: Plotly's line height
FONT, MIN_FONT = 10.5, 9   # a block's label: its size, and the smallest it is shrunk to so as to fit its block
# Em widths of the characters in a shape label ("8 × [120 × 120]"), as sans-serif fonts draw them (DejaVu Sans,
# Verdana: digits 0.64 em); margins.text_px counts 0.62 for these and a full em for ×, which is right for the
# words but would leave these labels a fifth more room than they take.
SHAPE_EM = {**dict.fromkeys("0123456789", 0.64), " ": 0.33, "[": 0.4, "]": 0.4, "×": 0.84}


def shape_text(*dims) -> str:
    """[5 × 256]: the shape of one tensor, batch left out."""
    return "[" + " × ".join(str(d) for d in dims) + "]"


def shape_px(s: str, size: float) -> float:
    """Width in px of a shape label at font `size` (SHAPE_EM; other characters as margins.text_px counts them)."""
    return sum(SHAPE_EM[ch] * size if ch in SHAPE_EM else text_px(ch, size) for ch in s)


def fit_label(label: str, width_px: float) -> tuple[str, float]:
    """A block's (escaped) label and its font size, fitted to width_px: one line at FONT when it fits; else two
    lines, at the "·" before the head count or d_ff when both halves fit, else at the space or "·" that makes the
    wider line narrowest, in a font shrunk (to MIN_FONT at least) until the wider line fits."""
    if text_px(label, FONT) <= width_px:
        return label, FONT
    dot = [(label[:i].strip(), label[i + 1:].strip()) for i, ch in enumerate(label) if ch == "·"]
    space = [(label[:i], label[i + 1:]) for i, ch in enumerate(label) if ch == " " and label[i + 1] != "·"
             and label[i - 1] != "·" and 1 < i < len(label) - 2]        # no line of one character ("⊕")
    wide = lambda two: max(text_px(x, FONT) for x in two)           # noqa: E731
    fits = [two for two in dot if wide(two) <= width_px]
    lines = min(fits or space + dot or [(label, "")], key=wide)
    size = max(MIN_FONT, min(FONT, FONT * width_px / wide(lines)))
    return "<br>".join(x for x in lines if x), size


def narrow_layout(cfg: ModelConfig, column_px: int) -> tuple[int, tuple[Optional[str], ...]]:
    """(fit_px, the parts to draw one under the other) in a column narrower than a laptop's (a phone's): one column
    of blocks is all such a column holds with its labels readable, so an encoder-decoder is drawn as two figures,
    its encoder, then its decoder (architecture_diagram's `part`); each is fitted to the column, whole on the
    screen. A model of one column is one figure (part None)."""
    return min(FIT_PX, column_px - 2 * MARGIN_PX), ("encoder", "decoder") if cfg.is_encoder_decoder else (None,)


def _x_layout(cfg: ModelConfig, columns: list[tuple[str, int]], src_len,
              labels: dict, fit_px: int = FIT_PX) -> tuple[list[float], float, float]:
    """The columns' centres, the memory line's x (two columns) and the x range's width (data units), so that at
    fit_px the labels right of a column (what its blocks compute, and the encoder's output on its way across) fit
    beside it. Left to right, with s the px per unit: the rail and a block, then per column its inner labels
    (inner_px / s) and a gap, the memory's label (mem_px / s) before the next column's frame. The width
    R = fixed + labels_px / s and s = fit_px / R, so R = fixed · fit_px / (fit_px − labels_px)."""
    inner = [max([shape_px(x, 10) for k in column_kinds(cfg, c) if (x := _inner_shape(k, cfg, n, src_len, labels))]
                 or [0.0]) for c, n in columns]
    mem = shape_px(shape_text(src_len, cfg.d_model), 9) if len(columns) == 2 else 0.0
    left = W / 2 + 0.6                                        # the first centre, from the range's left end
    beside = W / 2 + 0.2 + PAD                                # a centre to the end of its inner labels, less them
    across = 0.06 + PAD + 0.45 + W / 2                        # the memory line to the next centre, less its label
    fixed = left + beside * len(columns) + across * (len(columns) - 1)
    labels_px = min(sum(inner) + mem, fit_px / 2)             # the blocks keep at least half of the width
    s = (fit_px - labels_px) / fixed
    mid = beside + inner[0] / s                               # the encoder's output goes up this line
    return [0.0] + [mid + mem / s + across] * (len(columns) == 2), mid, fixed + labels_px / s


def column_parts(cfg: ModelConfig, column: str) -> tuple[list[str], list[str], list[str]]:
    """(embeddings, one layer, output) blocks of a column, bottom to top. Norms sit where model.py puts them:
    pre-norm x + f(LN(x)), post-norm LN(x + f(x)). An encoder-only model (BERT) adds its segment embeddings
    and the norm over the embeddings, and ends in its masked-LM head when it has one."""
    attn = ("self_attn" if column == "encoder" else
            "prefix_attn" if cfg.architecture == "prefix_lm" else "masked_attn")
    subs = [attn] + (["cross_attn"] if column == "decoder" and cfg.is_encoder_decoder else []) + ["ffn"]
    layer = [k for s in subs for k in (["norm", s, "add"] if cfg.norm == "pre" else [s, "add_norm"])]
    embed = ["input", "tok_embed", "pos"] + ["seg"] * bool(cfg.type_vocab_size) + ["emb_norm"] * cfg.embed_norm
    head = (["linear", "softmax"] if column == "decoder" else
            ["mlm_head", "linear", "softmax"] if cfg.is_encoder_only and cfg.head == "mlm" else [])
    return embed, layer, (["final_norm"] if cfg.norm == "pre" else []) + head


def column_kinds(cfg: ModelConfig, column: str) -> list[str]:
    """The blocks of one column bottom to top: input, embeddings, one layer's sublayers (drawn once, N×),
    the final norm (pre-norm only), and the output head (column_parts)."""
    return [k for part in column_parts(cfg, column) for k in part]


def _label(labels: dict, kind: str, cfg: ModelConfig, column: str) -> str:
    labels = {**LABELS, **labels}
    variants = ([f"{kind}.rms"] * (cfg.norm_type == "rms") + [f"{kind}.gated"] * (cfg.ffn == "gated")
                + [f"{kind}.unscaled"] * (not cfg.scale_embeddings)       # GPT-2, Llama, Qwen2: no × √d_model
                + [f"{kind}.mlm"] * cfg.is_encoder_only                   # BERT's softmax: every position's piece
                + [f"{kind}.bias"] * (cfg.positional == "relative"))      # T5: a bias on the scores, not a table
    lab = next((labels[v] for v in variants if v in labels), labels.get(kind, kind))
    if kind == "input":
        lab = labels["input." + ("source" if column == "encoder" and cfg.is_encoder_decoder else "target"
                                 if cfg.is_encoder_decoder else "sequence")]
    return lab.format(h=cfg.n_heads, act=cfg.activation, d_ff=cfg.d_ff, v=cfg.vocab_size,
                      kind=labels["pos." + cfg.positional], b=cfg.rel_buckets)


def _inner_shape(kind: str, cfg: ModelConfig, n: int, n_src: Optional[int], labels: dict) -> Optional[str]:
    """What a block computes inside (beside it): attention patterns, the FFN's hidden layer."""
    if kind in ("self_attn", "masked_attn", "prefix_attn"):
        return labels["heads_shape"].format(h=cfg.n_heads, q=n, k=n)
    if kind == "cross_attn":
        return labels["heads_shape"].format(h=cfg.n_heads, q=n, k=n_src)
    if kind == "ffn":
        return shape_text(n, cfg.d_ff)
    if kind == "pos" and cfg.positional == "relative":        # T5: the bias every layer's self-attention adds
        return labels["heads_shape"].format(h=cfg.n_heads, q=n, k=n)
    return None


def architecture_diagram(cfg: ModelConfig, src_len: Optional[int], tgt_len: int, labels: Optional[dict] = None,
                         title: str = "", fit_px: int = FIT_PX, part: Optional[str] = None) -> go.Figure:
    """The model as a block diagram, data flowing upward. src_len: encoder input length (None without an
    encoder); tgt_len: decoder input length (a one-sequence model: the whole sequence). fit_px: the plot width its
    labels and title are fitted to (a phone's: narrow_layout). part: "encoder" or "decoder" draws that column of an
    encoder-decoder alone (a phone's column holds one): the encoder's output then leaves its top towards the decoder
    named, and the decoder's cross-attention takes it in from the left, both in the encoder line's colour."""
    labels = {**LABELS, **(labels or {})}
    if cfg.is_encoder_decoder and src_len is None:
        raise ValueError("an encoder-decoder diagram needs src_len (the source's number of tokens)")
    if cfg.is_encoder_only and src_len is None:
        raise ValueError("an encoder-only diagram needs src_len (the text's number of tokens)")
    if part is not None and (not cfg.is_encoder_decoder or part not in ("encoder", "decoder")):
        raise ValueError(f"part {part!r}: only an encoder-decoder's 'encoder' or 'decoder' is drawn alone")
    names = [("encoder", src_len), ("decoder", tgt_len)] if cfg.is_encoder_decoder \
        else [("encoder", src_len)] if cfg.is_encoder_only else [("decoder", tgt_len)]
    names = [(c, n) for c, n in names if part in (None, c)]
    centres, mid, width = _x_layout(cfg, names, src_len, labels, fit_px)
    columns = [(c, x, n) for (c, n), x in zip(names, centres)]
    block_px = W * fit_px / width - 8                           # a full block's inside at fit_px, 4 px each side
    fig = go.Figure()
    ann, shapes, blocks, tops = [], [], [], {}     # shapes set once: add_shape one by one re-validates them all
    n_rows = max(len(column_kinds(cfg, c)) for c, _, _ in columns)
    for column, x, n in columns:
        embed, layer, _ = column_parts(cfg, column)
        kinds = column_kinds(cfg, column)
        first_layer, last_layer = len(embed), len(embed) + len(layer) - 1
        ends = column == "decoder" or cfg.is_encoder_only              # the column the model's output leaves
        for row, kind in enumerate(kinds):
            y = float(row)
            name = f"{column}:{kind}"
            blocks.append(name)
            small = kind in ("add", "norm")
            w = W * (0.55 if small else 1.0)
            shapes.append(dict(type="rect", x0=x - w / 2, x1=x + w / 2, y0=y - H / 2, y1=y + H / 2, name=name,
                               line=dict(color="#555", width=1), fillcolor=COLOURS[kind], layer="below"))
            label, size = fit_label(escape(_label(labels, kind, cfg, column)), block_px * w / W)
            ann.append(dict(x=x, y=y, text=label, showarrow=False, font=dict(size=size, color="#222"), name=name))
            inner = _inner_shape(kind, cfg, n, src_len, labels)
            if inner:
                ann.append(dict(x=x + W / 2 + 0.2, y=y, text=escape(inner), showarrow=False, xanchor="left",
                                font=dict(size=10, color="#7f3b08"), name=f"inner:{name}"))
            if row:            # the arrow from the block below, with the shape that flows along it
                shape = shape_text(n) if row == 1 else shape_text(n, cfg.d_model)
                ann.append(dict(x=x, y=y - H / 2, ax=x, ay=y - 1 + H / 2, xref="x", yref="y", axref="x", ayref="y",
                                showarrow=True, arrowhead=2, arrowsize=1, arrowwidth=1.2, arrowcolor="#444", text=""))
                ann.append(dict(x=x + 0.06, y=y - 0.5, text=escape(shape), showarrow=False, xanchor="left",
                                font=dict(size=9, color="#1f4e79"), name=f"shape:{name}", bgcolor="white",
                                borderpad=0))              # the layer frame's dashed edge passes behind it
        # the output's shape, above the top block
        top = len(kinds) - 1
        out = shape_text(n, cfg.out_vocab) if "linear" in kinds else shape_text(n, cfg.d_model)
        tops[column] = (x, top)
        if ends or part == "encoder":                 # alone, the encoder's output leaves for the decoder
            # the encoder's label goes left of its arrow: its top block can be the layer's, under the frame's "N×"
            arrow, ink, text, side = ("#444", "#1f4e79", escape(out), 1) if ends else \
                ("#674ea7", "#674ea7", f"{escape(out)} → {escape(labels['decoder'])}", -1)
            ann.append(dict(x=x, y=top + 0.62, ax=x, ay=top + H / 2, xref="x", yref="y", axref="x", ayref="y",
                            showarrow=True, arrowhead=2, arrowwidth=1.2, arrowcolor=arrow, text=""))
            ann.append(dict(x=x + 0.06 * side, y=top + 0.7, text=text, showarrow=False,
                            xanchor="left" if side > 0 else "right", font=dict(size=9, color=ink),
                            name=f"shape:{column}:output"))
        # one layer, drawn once, inside a dashed frame marked N×
        n_layers = cfg.n_encoder_layers if column == "encoder" else cfg.n_decoder_layers
        shapes.append(dict(type="rect", x0=x - W / 2 - 0.45, x1=x + W / 2 + 0.12, y0=first_layer - 0.42,
                           y1=last_layer + 0.42, line=dict(color="#888", width=1.2, dash="dash"),
                           name=f"{column}:layers"))
        ann.append(dict(x=x + W / 2 + 0.12, y=last_layer + 0.42, text=escape(labels["layers"].format(n=n_layers)),
            showarrow=False, xanchor="right", yanchor="bottom", font=dict(size=15, color="#333"),
            name=f"layers:{column}"))
        head = labels["encoder_only" if cfg.is_encoder_only else "encoder" if column == "encoder"
                      else "decoder" if cfg.is_encoder_decoder else "decoder_only"]
        ann.append(dict(x=x, y=-0.85, text=f"<b>{escape(head)}</b>", showarrow=False, font=dict(size=13)))
        # residual connections: from a sublayer's input, around it, into its add
        rail = x - W / 2 - 0.25
        for row, kind in enumerate(kinds):
            if kind in ("add", "add_norm"):
                start = row - (2 if kind == "add" else 1)           # the first block of this sublayer
                y_in, y_add = start - 0.4, float(row)
                shapes.append(dict(type="path", path=f"M {x},{y_in} L {rail},{y_in} L {rail},{y_add} L "
                                   f"{x - W * (0.275 if kind == 'add' else 0.5)},{y_add}",
                                   line=dict(color="#999", width=1), name=f"{column}:residual"))
    if part == "decoder":           # the encoder's output, drawn in the figure above, comes in from the left
        (dx, _), cross = tops["decoder"], column_kinds(cfg, "decoder").index("cross_attn")
        ann.append(dict(x=dx - W / 2, y=cross, ax=dx - W / 2 - 0.5, ay=cross, xref="x", yref="y", axref="x",
                        ayref="y", showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor="#674ea7", text=""))
    if cfg.is_encoder_decoder and part is None:   # the encoder's output feeds every decoder layer's cross-attention
        (ex, etop), (dx, _) = tops["encoder"], tops["decoder"]
        cross = column_kinds(cfg, "decoder").index("cross_attn")
        y_out = etop + 0.55
        shapes.append(dict(type="path", path=f"M {ex},{etop + H / 2} L {ex},{y_out} L {mid},{y_out} L {mid},{cross} "
                           f"L {dx - W / 2 - 0.5},{cross}", line=dict(color="#674ea7", width=1.5), name="memory"))
        ann.append(dict(x=dx - W / 2, y=cross, ax=dx - W / 2 - 0.5, ay=cross, xref="x", yref="y", axref="x",
                        ayref="y", showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor="#674ea7", text=""))
        ann.append(dict(x=mid + 0.06, y=(y_out + cross) / 2, text=escape(shape_text(src_len, cfg.d_model)),
                        showarrow=False, xanchor="left", font=dict(size=9, color="#674ea7"),
                        name="shape:memory"))
    # a column narrower than a laptop's (a phone, no hover) has Plotly's toolbar drawn all the time over the top
    # right: there the title's lines end short of it
    title = wrap(escape(title), fit_px - TOOLBAR_W_PX if fit_px < FIT_PX else fit_px)
    more = TITLE_LINE_PX * (title.count("<br>"))           # its lines above the blocks, which keep their height
    put(fig.layout, shapes=shapes, annotations=ann, height=int(90 + 48 * (n_rows + 1.5)) + more,
        margin=dict(l=MARGIN_PX, r=MARGIN_PX, t=(40 + more) if title else 10, b=10), showlegend=False,
        title=dict(text=title, x=0.0, xanchor="left"),
        meta={"blocks": blocks}, dragmode=False,
        hovermode=False, xaxis=dict(visible=False, range=[-W / 2 - 0.6, width - W / 2 - 0.6],
                                    fixedrange=True),
        yaxis=dict(visible=False, range=[-1.2, n_rows + 0.4], fixedrange=True))
    white(fig)
    return fig
