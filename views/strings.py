"""Every user-facing string of the app, by key, so the interface can be translated in one place.

    from views.strings import t
    t("dc.max_new")            # -> "Max new tokens"

To translate: add a dict with the same keys (e.g. ZH) and point LANG at it.
Figure texts are plain (they are escaped by viz_transformer.plots); markdown strings are marked md.
"""
from __future__ import annotations

EN = {
    # navigation
    "app.title": "viz_transformer",
    "nav.overview": "Overview",
    "nav.attention": "Attention: heads and layers",
    "nav.steps": "Attention step by step",
    "nav.masks": "Masks",
    "nav.positional": "Positional encoding",
    "nav.decoding": "Step-through decoding",
    "nav.knockout": "Knock out heads",
    "nav.positions": "Positions on/off",
    "nav.compare": "Compare two inputs",

    # sidebar
    "sidebar.checkpoint": "Checkpoint",
    "sidebar.checkpoint_help": "Every folder under {root}",
    "sidebar.broken_mark": "⚠ {name} (unusable)",
    "sidebar.broken_title": "Unusable checkpoint folders",
    "sidebar.no_checkpoints": "No checkpoint folders under {root}. Train one first "
                              "(python -m viz_transformer train ...) or set VIZ_CHECKPOINTS.",
    "sidebar.examples": "Examples",
    "sidebar.text": "Text",
    "sidebar.text_help": "The model's input. A translator translates it; a language model continues it.",
    "sidebar.loading": "Loading the model…",
    "sidebar.running": "Running the model and capturing every tensor…",
    "sidebar.cut.end": "The text was too long for this model (max_len {max_len}): its last {n} pieces were left out.",
    "sidebar.cut.start": "The text was too long for this model (max_len {max_len}): its first {n} pieces were left "
                         "out (a language model keeps the end of its prompt, the part it continues).",
    "sidebar.model_caption": "{arch} · {layers} · {heads} heads · d_model {d_model}",
    "sidebar.layers_ed": "{enc}+{dec} layers",
    "sidebar.layers_d": "{dec} layers",

    # shared messages
    "msg.empty": "Type a sentence in the sidebar (or pick an example) to see inside the model.",
    "msg.broken": "This checkpoint cannot be used:",
    "msg.failed": "The model could not run on this text:",
    "guard.reset": "Some settings held values this page cannot use; they were put back to their defaults.",
    "msg.no_block": "This model has no {block}.",

    # attention block names (the capture names stay verbatim in code)
    "block.encoder.self_attn": "encoder self-attention",
    "block.decoder.self_attn": "decoder self-attention (masked)",
    "block.decoder.cross_attn": "cross-attention (decoder → encoder)",
    "block": "Attention block",
    "layer": "Layer",
    "head": "Head",
    "head.mean": "mean over heads",
    "head.max": "max over heads",
    "axis.query": "query (attending)",
    "axis.key": "key (attended to)",
    "axis.head": "head",
    "axis.layer": "layer",
    "axis.dim": "dimension",
    "axis.position": "position",
    "cb.weight": "attention weight",
    "cb.value": "value",
    "cb.mask": "mask",
    "mask.allowed": "may attend",
    "mask.blocked": "masked (−∞)",

    # overview
    "ov.title": "Overview",
    "ov.intro": "What this checkpoint is, how your text is cut into SentencePiece pieces, and what the model "
                "makes of it. Every other page looks inside this one forward pass.",
    "ov.arch": "Architecture as configured",
    "ov.arch.encoder_decoder": "encoder-decoder (translator)",
    "ov.arch.decoder_only": "decoder-only (language model)",
    "ov.arch.prefix_lm": "prefix LM (decoder with a bidirectional prefix)",
    "ov.fact": "property",
    "ov.value": "value",
    "ov.training": "Training",
    "ov.pieces": "Your text as pieces",
    "ov.pieces_help": "▁ marks a piece that starts a word (a space came before it). "
                      "Chinese characters and punctuation are words of their own.",
    "ov.col.pos": "position",
    "ov.col.piece": "piece",
    "ov.col.id": "id",
    "ov.col.word": "word",
    "ov.col.starts": "starts a word",
    "ov.src": "Encoder input",
    "ov.tgt": "Decoder input",
    "ov.output.encoder_decoder": "Translation (greedy)",
    "ov.output.lm": "Continuation (greedy)",
    "ov.empty_output": "(the model produced nothing: it ended at once)",

    # attention: heads and layers
    "at.title": "Attention: heads and layers",
    "at.intro": "Row = query (the token that looks), column = key (the token looked at). Each row sums to 1.",
    "at.words": "Word level",
    "at.words_help": "Sum the attention a word's pieces receive; average the rows of a word's pieces.",
    "at.heatmap_title": "{block}, layer {layer}, {head}",
    "at.head_n": "head {h}",
    "at.model_view": "Model view: every layer and head",
    "at.model_view_help": "Each tile is one head's pattern (rows = queries, columns = keys). "
                          "Click a tile to open that head above.",
    "at.model_view_title": "{block}: all layers × heads",
    "at.model_view_cb": "max weight in block",
    "at.model_view_hover": "click to open",
    "at.downsampled": "{n} tokens: each tile is shrunk to {m}×{m} cells (each cell = the max of its block).",
    "at.line_view": "Line view",
    "at.line_heads": "Heads to draw",
    "at.line_min": "Hide lines lighter than",
    "at.line_window": "Tokens shown (window)",
    "at.line_capped": "Showing queries {qa}–{qb} and keys {ka}–{kb}, at most {m} lines per head.",
    "at.line_title": "{block}, layer {layer}: lines from queries (left) to keys (right)",

    # step by step
    "st.title": "Attention step by step",
    "st.intro": "One head on your text with its real numbers: Attention(Q, K, V) = softmax(QKᵀ / √d_k + mask) V.",
    "st.divisor": "Divide the scores by (the model uses √d_k = {sqrt:.2f})",
    "st.divisor_help": "Smaller → softmax sharpens toward the arg-max; larger → it flattens toward uniform.",
    "st.window": "Show positions from",
    "st.window_note": "Showing query rows {qa}–{qb} and key columns {ka}–{kb}. Softmax still runs over every key.",
    "st.Q": "Q: queries of head {head}",
    "st.K": "K: keys of head {head}",
    "st.V": "V: values of head {head}",
    "st.QK": "Q Kᵀ (raw dot products)",
    "st.scaled": "Q Kᵀ ÷ {div:.2f}",
    "st.masked": "+ mask (grey = −∞)",
    "st.softmax": "softmax over each row = attention weights",
    "st.z": "weights × V = this head's output",
    "st.check": "Recomputed weights vs the captured hook_pattern (max |difference|)",
    "st.check_other": "You changed the divisor, so these weights differ from what the model computed.",
    "st.row": "Query row to compare",
    "st.row_title": "Weights of query {q}: divisor {div:.2f} vs √d_k",
    "st.series_div": "divisor {div:.2f}",
    "st.series_model": "√d_k = {sqrt:.2f} (the model)",
    "st.entropy": "Entropy of the row (0 = one-hot, {max:.2f} = uniform)",
    "st.why": "Why divide by √d_k?",
    "st.why_text": "If q and k have independent entries with variance 1, q·k is a sum of d_k such products: "
                   "its variance grows like d_k. Large scores push softmax into saturation (one weight ≈ 1, "
                   "tiny gradients). Dividing by √d_k brings the variance back to 1.",
    "st.var_title": "Variance of q·k for random q, k vs d_k",
    "st.var_raw": "q·k",
    "st.var_scaled": "q·k ÷ √d_k",
    "st.var_y": "variance",
    "axis.d_head": "d_head dimension",
    "axis.d_k": "d_k",

    # masks
    "mk.title": "Masks",
    "mk.intro": "A mask says which keys each query may use: masked scores become −∞ before softmax, so "
                "their weights are exactly 0. Blue = may attend, grey = masked.",
    "mk.padding": "Padding mask",
    "mk.padding_help": "Your text is batched with a second sentence; the shorter one is filled with [pad], "
                       "and no query may attend to a [pad] key. The figure shows the padded row.",
    "mk.other": "Second sentence for the batch",
    "mk.same_length": "Both sentences have the same number of pieces, so there is no padding: "
                      "change the second sentence.",
    "mk.padding_title": "Padding mask captured at {hook} (row {row} of the batch)",
    "mk.causal": "Causal mask",
    "mk.causal_help": "The decoder may not look ahead: query i sees keys 0..i.",
    "mk.causal_title": "Causal mask over the decoder input",
    "mk.prefix": "Prefix-LM mask",
    "mk.prefix_help": "Inside the prefix every token sees every other; after it, causal.",
    "mk.prefix_len": "Prefix length",
    "mk.prefix_title": "Prefix-LM mask, prefix = {p} tokens",
    "mk.cross": "Cross-attention mask",
    "mk.cross_help": "Decoder queries look at encoder keys: only the source's [pad] keys are masked.",
    "mk.cross_title": "Cross-attention mask captured at {hook} (row {row} of the batch)",
    "mk.cross_none": "A decoder-only model has no cross-attention.",
    "mk.applied": "What each head actually applied",
    "mk.applied_help": "From your run's capture: the mask (hook_mask), the scores before it (hook_scores), "
                       "after it, and the resulting pattern (hook_pattern).",
    "mk.mask_title": "{hook}",
    "mk.before": "Scores before the mask (head {head})",
    "mk.after": "Scores after the mask (head {head}; grey = −∞)",
    "mk.pattern": "Pattern after softmax (head {head})",
    "cb.score": "score",

    # positional
    "pe.title": "Positional encoding",
    "pe.intro": "Attention alone ignores order; a position vector is added to every token embedding. "
                "Sinusoidal: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).",
    "pe.uses": "This checkpoint uses **{kind}** positions (d_model = {d}, max_len = {L}).",
    "pe.n": "Positions shown",
    "pe.sin_title": "Sinusoidal encoding: {n} positions × {d} dimensions",
    "pe.learned_title": "Learned position embeddings of this checkpoint",
    "pe.dims": "Dimensions to draw as curves",
    "pe.curves_title": "Chosen dimensions over position",
    "pe.dim_n": "dim {d}",
    "pe.sim_title": "Dot product PE(i)·PE(j) ({kind})",
    "pe.offset_title": "PE(p)·PE(p+δ) for several starting positions p ({kind})",
    "pe.offset_note": "For the sinusoidal table the curves lie on top of each other: the product depends "
                      "only on the distance δ, not on where you start.",
    "pe.anchor": "p = {p}",
    "pe.offset": "distance δ",
    "pe.kind.sinusoidal": "sinusoidal",
    "pe.kind.learned": "learned",
    "cb.dot": "dot product",

    # decoding
    "dc.title": "Step-through decoding",
    "dc.intro.encoder_decoder": "The encoder reads the text once; the decoder starts from [begin] and adds one "
                                "token per step, each time attending to the source (cross-attention) and to "
                                "what it has written so far (masked self-attention).",
    "dc.intro.lm": "The model continues your text one token per step, attending to everything before it.",
    "dc.strategy": "Strategy",
    "dc.greedy": "greedy",
    "dc.sample": "sampling",
    "dc.beam": "beam search",
    "dc.temperature": "Temperature",
    "dc.top_k": "Top-k (0 = off)",
    "dc.top_p": "Top-p",
    "dc.seed": "Seed",
    "dc.width": "Beam width",
    "dc.max_new": "Max new tokens",
    "dc.layer": "Layer for attention",
    "dc.reset": "Start",
    "dc.back": "Back",
    "dc.next": "Next",
    "dc.play": "Play",
    "dc.pause": "Pause",
    "dc.running": "Decoding…",
    "dc.progress": "Step {i} of {n}",
    "dc.start": "Start: the decoder input is only the prompt. Press Next to choose the first token.",
    "dc.sequence": "Decoder tokens so far",
    "dc.chosen": "Step {i}: the query of {query} chose {piece} (p = {p:.3f})",
    "dc.cands_title": "Top candidates at step {i}",
    "dc.cross_title": "Cross-attention of the newest query ({query}) over the source, layer {layer}",
    "dc.self_title": "Self-attention of the newest query ({query}) over the tokens so far, layer {layer}",
    "dc.beams": "Beams",
    "dc.beam_title": "Beam search up to step {i}: filled = extended, hollow = dropped, diamond = finished",
    "dc.extended": "extended",
    "dc.dropped": "dropped",
    "dc.finished": "finished",
    "dc.done": "Finished: {text}",
    "dc.cut": "To leave room for {new} new tokens, the prompt was cut: its first {n} pieces are not used here.",
    "axis.candidate": "candidate token",
    "axis.probability": "probability",
    "axis.step": "step",
    "axis.beam": "beam (rank)",
    "axis.source": "source piece (key)",
    "axis.so_far": "token so far (key)",
    "cb.prob": "probability",
    "cb.logp": "log-probability",
    # knock out heads
    "ko.title": "Knock out heads",
    "ko.intro": "Switch attention heads off and watch the output change. Pick heads per block below, or "
                "rank every head first and click the ones that matter.",
    "ko.mode": "How a head is knocked out",
    "ko.mode.zero": "zero",
    "ko.mode.uniform": "uniform",
    "ko.mode.mean": "mean",
    "ko.mode_help": "zero: the head's output is 0. uniform: its attention is spread evenly over every key it "
                    "may see. mean: its output is replaced by its average over the positions of this text.",
    "ko.pick": "Heads of the {block} to knock out",
    "ko.cell": "L{layer}·H{head}",
    "ko.all_layer": "all of L{layer}",
    "ko.all_layer_help": "Knock out every head of layer {layer} of this block",
    "ko.clear": "Keep every head",
    "ko.n_off": "{n} of {total} heads knocked out.",
    "ko.none_off": "No head is knocked out yet: both sides are the same model.",
    "ko.before": "Original model",
    "ko.after": "With the heads knocked out",
    "ko.empty_output": "(nothing: it ended at once)",
    "ko.probs_title": "Probability of each token of the original output, before and after",
    "ko.series_before": "original model",
    "ko.series_after": "heads knocked out",
    "ko.probs_help": "Both models read exactly the original output (teacher forcing): a bar that drops is a "
                     "token the knocked-out heads helped to choose.",
    "ko.attention": "Attention after the knock-out",
    "ko.attention_title": "After knock-out: {block}, layer {layer}, {head}",
    "ko.is_off": "This head is knocked out ({mode}).",
    "ko.rank": "Ranking: knock out each head alone",
    "ko.rank_help": "Δ log-probability: how much less likely the original output becomes when only that head "
                    "is knocked out (more negative = the head matters more). Click a cell to knock that head out.",
    "ko.rank_run": "Rank every head",
    "ko.rank_progress": "Ranking heads: step {done} of {total}",
    "ko.rank_title": "{block}: Δ log-probability per head ({mode})",
    "ko.rank_hover": "click to knock out",
    "ko.col.block": "block",
    "ko.col.layer": "layer",
    "ko.col.head": "head",
    "ko.col.delta": "Δ log-probability",
    "ko.col.changed": "output changes",
    "cb.delta": "Δ log-prob",

    # positions on/off
    "po.title": "Positions on/off",
    "po.intro": "Attention compares every token with every other, so on its own it does not see order: the "
                "positional encoding is what tells the model where each piece is. Switch it off and an encoder "
                "sees a bag of pieces — the same pieces in any order give the same set of output vectors.",
    "po.intro_lm": "This model has no encoder, so the test runs on its decoder. Its causal mask lets each token "
                   "see only the ones before it, so even without positions the order still leaves a trace.",
    "po.on": "Positions on (the model as trained)",
    "po.off": "Positions off (every hook_pos is 0)",
    "po.output": "Output",
    "po.att_title": "{state}: {block}, layer {layer}, {head}",
    "po.state_on": "positions on",
    "po.state_off": "positions off",
    "po.order": "The same pieces in another order",
    "po.order_help": "The text's own pieces, moved around (never re-tokenized): the special tokens stay where "
                     "they are. A ready pair: 我喜欢你。 and 你喜欢我。 — but SentencePiece cuts them into different "
                     "pieces, so here the pieces of your text are permuted instead.",
    "po.how": "Permutation",
    "po.how.reverse": "reverse the pieces",
    "po.how.swap": "swap the first and last piece",
    "po.pieces": "Pieces",
    "po.permuted": "Permuted",
    "po.gap": "Largest distance from an output vector of one order to the nearest output vector of the other "
              "({part}, last layer)",
    "po.gap_on": "positions on",
    "po.gap_off": "positions off",
    "po.gap_caption": "≈ 0 means the same set of vectors, only in another order: the model cannot tell the two "
                      "inputs apart.",
    "po.too_short": "Order needs at least two pieces: {error}",
    "po.col.state": "positions",
    "po.col.output": "output of the original order",
    "po.col.permuted_output": "output of the permuted order",
    "po.col.gap": "gap",

    # compare two inputs
    "cp.title": "Compare two inputs",
    "cp.intro": "Your text (sidebar) and a second one through the same head, side by side.",
    "cp.other": "Second text",
    "cp.first_title": "Text 1: {block}, layer {layer}, {head}",
    "cp.second_title": "Text 2: {block}, layer {layer}, {head}",
    "cp.diff_title": "Text 1 − text 2: {block}, layer {layer}, {head}",
    "cp.diff_axis": "pieces (text 1 / text 2)",
    "cp.no_diff": "No difference view: the two inputs give {a} and {b} (queries × keys) in this block, and only "
                  "patterns of the same shape can be subtracted cell by cell. Try a second text with the same "
                  "number of pieces.",
    "cp.empty": "Type a second text to compare.",
    "cb.diff": "difference",
}

LANG = EN


def t(key: str, **kw) -> str:
    """The string for `key`, formatted with kw. A missing key shows itself (easy to spot)."""
    s = LANG.get(key, EN.get(key, key))
    return s.format(**kw) if kw else s
