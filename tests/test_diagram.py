"""The architecture diagram against the config and the tokenizer: which blocks, in which order (the norm
where model.py puts it), the layer and head counts, and the shape on every arrow for one text."""
from __future__ import annotations

import pytest

from viz_transformer import decode, DecodeSettings, load_checkpoint
from viz_transformer.core.config import ModelConfig
from viz_transformer.plots.diagram import architecture_diagram

TEXT = "我是一名工程师。"

# written out by hand from the classic figure and model.py (pre: x + f(LN(x)) and a final LN; post: LN(x + f(x)))
EXPECTED = {
    ("encoder", "encoder_decoder", "pre"): ["input", "tok_embed", "pos", "norm", "self_attn", "add", "norm", "ffn",
                                           "add", "final_norm"],
    ("decoder", "encoder_decoder", "pre"): ["input", "tok_embed", "pos", "norm", "masked_attn", "add", "norm",
                                           "cross_attn", "add", "norm", "ffn", "add", "final_norm", "linear", "softmax"],
    ("encoder", "encoder_decoder", "post"): ["input", "tok_embed", "pos", "self_attn", "add_norm", "ffn", "add_norm"],
    ("decoder", "encoder_decoder", "post"): ["input", "tok_embed", "pos", "masked_attn", "add_norm", "cross_attn",
                                            "add_norm", "ffn", "add_norm", "linear", "softmax"],
    ("decoder", "decoder_only", "pre"): ["input", "tok_embed", "pos", "norm", "masked_attn", "add", "norm", "ffn", "add",
                                        "final_norm", "linear", "softmax"],
    ("decoder", "decoder_only", "post"): ["input", "tok_embed", "pos", "masked_attn", "add_norm", "ffn", "add_norm",
                                         "linear", "softmax"],
    ("decoder", "prefix_lm", "pre"): ["input", "tok_embed", "pos", "norm", "prefix_attn", "add", "norm", "ffn", "add",
                                     "final_norm", "linear", "softmax"],
}


def annotations(fig) -> dict[str, str]:
    return {a.name: a.text for a in fig.layout.annotations if a.name}


def column(fig, name: str) -> list[str]:
    """A column's block kinds, read from the rectangles bottom to top (not from meta)."""
    rects = [s for s in fig.layout.shapes if s.type == "rect" and (s.name or "").startswith(name + ":")
             and s.name != f"{name}:layers"]
    return [s.name.split(":", 1)[1] for s in sorted(rects, key=lambda s: s.y0)]


@pytest.mark.parametrize("folder", ["tiny-zh-en", "tiny-lm", "tiny-prefix", "tiny-zh-en-decoder", "tiny-zh-en-prefix"])
def test_blocks_and_shapes_match_the_checkpoint(ckpt_root, folder):
    hm = load_checkpoint(ckpt_root / folder)
    cfg, tok = hm.cfg, hm.tokenizer
    pieces = len(tok.encode(TEXT))
    out = len(decode(hm, TEXT, DecodeSettings(strategy="greedy")).generated_ids)
    if cfg.is_encoder_decoder:
        S, T = pieces + 1, 1 + out                        # source + [end]; [begin] + what it generated
    elif cfg.is_translator:
        S, T = None, 1 + pieces + 1 + out                 # [begin] source [sep] + what it generated
    else:
        S, T = None, 1 + pieces + out                     # [begin] prompt + its continuation
    fig = architecture_diagram(cfg, S, T)
    ann = annotations(fig)
    cols = ["encoder", "decoder"] if cfg.is_encoder_decoder else ["decoder"]
    for name, n, layers in zip(cols, [S, T] if S else [T], [cfg.n_encoder_layers, cfg.n_decoder_layers][-len(cols):]):
        want = EXPECTED[(name, cfg.architecture, cfg.norm)]
        assert column(fig, name) == want
        assert [b.split(":", 1)[1] for b in fig.layout.meta["blocks"] if b.startswith(name)] == want
        assert ann[f"shape:{name}:tok_embed"] == f"[{n}]"                       # token ids
        for kind in want[2:]:                                                   # every arrow after the embedding
            assert ann[f"shape:{name}:{kind}"] == f"[{n} × {cfg.d_model}]", kind
        assert ann[f"layers:{name}"] == f"{layers}×"
        attn = next(k for k in want if k.endswith("attn") and k != "cross_attn")
        assert ann[f"inner:{name}:{attn}"] == f"{cfg.n_heads} × [{n} × {n}]"
        assert ann[f"inner:{name}:ffn"] == f"[{n} × {cfg.d_ff}]"
        assert str(cfg.n_heads) in ann[f"{name}:{attn}"]
    assert ann["shape:decoder:output"] == f"[{T} × {cfg.vocab_size}]"
    if cfg.is_encoder_decoder:
        assert ann["inner:decoder:cross_attn"] == f"{cfg.n_heads} × [{T} × {S}]"
        assert ann["shape:memory"] == f"[{S} × {cfg.d_model}]"
        assert any(s.name == "memory" for s in fig.layout.shapes)
    else:
        assert "shape:memory" not in ann and not any(s.name == "memory" for s in fig.layout.shapes)


def test_one_residual_connection_per_sublayer():
    for arch, norm in [("encoder_decoder", "pre"), ("decoder_only", "post")]:
        cfg = ModelConfig(architecture=arch, norm=norm, n_encoder_layers=3 if arch == "encoder_decoder" else 0)
        fig = architecture_diagram(cfg, 4 if arch == "encoder_decoder" else None, 6)
        residuals = [s for s in fig.layout.shapes if (s.name or "").endswith(":residual")]
        sublayers = (2 + 3) if arch == "encoder_decoder" else 2          # attention + FFN (+ cross-attention)
        assert len(residuals) == sublayers


def test_labels_are_the_callers_and_escaped():
    cfg = ModelConfig()
    fig = architecture_diagram(cfg, 3, 4, labels={"norm": "层归一化", "self_attn": "<b>自注意力</b> {h}"})
    ann = annotations(fig)
    assert ann["encoder:norm"] == "层归一化"
    assert ann["encoder:self_attn"] == f"&lt;b&gt;自注意力&lt;/b&gt; {cfg.n_heads}"


def test_an_encoder_decoder_needs_the_source_length():
    with pytest.raises(ValueError, match="src_len"):
        architecture_diagram(ModelConfig(), None, 4)


@pytest.mark.parametrize("width", [60, 120, 160, 400])
def test_a_fitted_label_keeps_every_word_on_at_most_two_lines(width):
    """fit_label only breaks lines and shrinks the font: the words read in order are the label's (a "·" it
    breaks at goes), at most two lines, the size between MIN_FONT and FONT. Whether it fits as drawn is
    tests/test_browser_diagram.py's question."""
    from viz_transformer.plots.diagram import FONT, MIN_FONT, fit_label
    for label in ["Cross-attention (K, V from the encoder) · 8 heads", "交叉注意力（键、值来自编码器）· 8 个头",
                  "⊕ Add (residual)", "LayerNorm", "Feed-forward (relu) · d_ff 1024"]:
        text, size = fit_label(label, width)
        assert MIN_FONT <= size <= FONT and text.count("<br>") <= 1
        assert text.replace("<br>", " ").replace("·", " ").split() == label.replace("·", " ").split()
        if width == 400:
            assert (text, size) == (label, FONT)


def test_a_phone_draws_an_encoder_decoder_one_column_to_a_figure():
    """part= draws one column of an encoder-decoder (what a phone's column holds): each figure has exactly that
    column's blocks, the same as in the two-column figure; the encoder's output names the decoder, the decoder's
    cross-attention gets an arrow in from outside; a model of one column has no parts."""
    from viz_transformer.plots.diagram import narrow_layout
    cfg, S, T = ModelConfig(), 9, 7
    whole = architecture_diagram(cfg, S, T)
    fit_px, parts = narrow_layout(cfg, 358)
    assert parts == ("encoder", "decoder") and fit_px == 358 - 2 * 10
    for part in parts:
        fig = architecture_diagram(cfg, S, T, part=part, fit_px=fit_px)
        assert fig.layout.meta["blocks"] == [b for b in whole.layout.meta["blocks"] if b.startswith(part + ":")]
        assert column(fig, "encoder" if part == "decoder" else "decoder") == []
        assert not any(s.name == "memory" for s in fig.layout.shapes)           # no line to a column not drawn
    enc = annotations(architecture_diagram(cfg, S, T, part="encoder"))
    assert enc["shape:encoder:output"] == f"[{S} × {cfg.d_model}] → Decoder"
    dec = architecture_diagram(cfg, S, T, part="decoder")
    cross = column(dec, "decoder").index("cross_attn")
    block = next(s for s in dec.layout.shapes if s.name == "decoder:cross_attn")
    arrows = [a for a in dec.layout.annotations if a.showarrow and a.y == cross and a.ax < a.x == block.x0]
    assert len(arrows) == 1                                                    # into the block's left edge
    lm = ModelConfig(architecture="decoder_only", n_encoder_layers=0)
    assert narrow_layout(lm, 358)[1] == (None,)
    with pytest.raises(ValueError, match="part"):
        architecture_diagram(lm, None, 6, part="decoder")
