"""Every user-facing string of the app, by key, so the interface can be translated in one place.

    from viz_explorer.kit.strings import t
    t("dc.max_new")            # -> "Max new tokens"

The Chinese table ZH (viz_explorer/kit/strings_zh.py) has exactly EN's keys and format placeholders
(tests/test_i18n.py checks it): a key added here must be added there too. The language of a session is
st.session_state["lang"] ("en" or "zh"), set from ?lang= and the sidebar switch (viz_explorer/kit/language.py);
a key missing from ZH falls back to English.
A count printed before a noun picks the noun's form with {n:piece|pieces} ("1 piece", "2 pieces"; see plurals).
Each Chinese entry records which English text it translates (strings_zh_source.py): after changing an English
string, re-translate it and run `python -m viz_explorer.kit.strings_check --update KEY` (tests/test_i18n.py checks).
Figure texts are plain (they are escaped by viz_transformer.plots.heatmaps); markdown strings are marked md.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator, Optional

EN = {
    # navigation
    "app.title": "viz_transformer",
    "nav.overview": "Overview",
    "nav.attention": "Attention: heads and layers",
    "nav.steps": "Attention step by step",
    "nav.why": "Why this attention",
    "nav.masks": "Masks",
    "nav.positional": "Positional encoding",
    "nav.decoding": "Step-through decoding",
    "nav.knockout": "Knock out heads",
    "nav.positions": "Positions on/off",
    "nav.compare": "Compare two inputs",
    "nav.architectures": "Compare architectures",
    "nav.training": "Attention over training",
    "nav.rollout": "Rollout and attribution",
    "nav.stats": "Head statistics",
    "nav.export": "Export and report",
    "nav.sec.look": "Look",
    "nav.sec.step": "Step through",
    "nav.sec.experiment": "Experiment",
    "nav.sec.train": "Train and export",
    "sidebar.lang": "Language",
    "lang.src": "Source language",
    "lang.tgt": "Target language",
    "lang.help": "This model translates between many languages: the source's code goes into the encoder's input, "
                 "the target's is the decoder's first token after its start (as transformers' generate forces it). "
                 "Chinese text starts as Chinese → English.",
    "lang.pair": "Languages: {src} → {tgt}",

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
    "sidebar.cut.end": "Your text is longer than this model can read ({max_len} {max_len:piece|pieces} at most), so it "
                       "reads only the beginning: everything from “{cut}…” on ({chars} {chars:character|characters}) "
                       "was left out.",
    "sidebar.cut.start": "Your text is longer than this model can read ({max_len} {max_len:piece|pieces} at most), so it "
                         "reads only the end, the part it continues: everything up to “…{cut}” ({chars} "
                         "{chars:character|characters}) was left out.",
    "in.mismatch.translator": "This model translates text written in {model}; yours is in {text}, so expect nonsense.",
    "in.mismatch.lm": "This model learned from text written in {model}; yours is in {text}, so expect nonsense.",
    "in.script.han": "Chinese characters",
    "in.script.latin": "Latin letters",
    "sidebar.model_caption": "{arch} · {layers} · {heads} {heads:head|heads} · d_model {d_model}",
    "sidebar.layers_ed": "{enc}+{dec} layers",
    "sidebar.layers_d": "{dec} {dec:layer|layers}",

    # shared messages
    "msg.empty": "Type a sentence in the sidebar (or pick an example) to see inside the model.",
    "req.large": "This model is large ({params} M parameters): what follows takes seconds, so it runs when you ask.",
    "pt.run": "Patch every component",
    "pt.progress": "Patching: {done} of {total} {total:run|runs}",
    "po.run": "Run without positions and the order test",
    "cp.run": "Run the second text",
    "cp.cosine": "Cosine similarity",
    "cp.cosine_of": "Between the two texts' sentence embeddings ({mode}).",
    "cp.cosine_help": "The last layer's hidden states pooled into one vector per text, as a sentence encoder "
                      "does (its 1_Pooling folder says how); 1 means the same direction, 0 unrelated.",
    "cp.pool.mean": "mean over the pieces",
    "cp.pool.cls": "the [CLS] piece",
    "cp.pool.max": "maximum over the pieces",
    "cp.pool.mean_sqrt_len_tokens": "sum over the pieces ÷ √(number of pieces)",
    "cp.pool.weightedmean": "mean weighted by position (piece i weighs i)",
    "cp.pool.lasttoken": "the last piece",
    "cp.pipe_dense": "then {n} Dense {n:layer|layers}",
    "cp.pipe_norm": "scaled to unit length",
    "cp.cosine_help_mean": "The last layer's hidden states averaged into one vector per text (this folder names "
                           "no pooling, so the mean is used); 1 means the same direction, 0 unrelated.",
    "cp.no_embedding": "No sentence embedding for this folder:",
    "cp.beyond": "sentence-transformers' encode reads only the first {limit} {limit:piece|pieces}; this text has {n}, so encode "
                 "would give another embedding (this one reads all {n}).",
    "cp.shift_title": "Heads whose attention differs most between the two texts",
    "cp.shift_help": "Each head's share of attention on the first piece, the last piece, the piece itself, the "
                     "previous piece and punctuation, averaged over the rows; the heads with the largest change "
                     "in one share come first.",
    "cp.col.head": "head",
    "cp.col.share": "where it looks",
    "cp.col.a": "first text",
    "cp.col.b": "second text",
    "cp.col.change": "change",
    "cp.head_at": "layer {layer} · head {head}",
    "mk.run": "Run the two texts as one batch",
    "msg.broken": "This checkpoint cannot be used:",
    "msg.failed": "The model could not run on this text:",
    "msg.needs_decoder": "This page ({page}) needs a model that generates text: an encoder-only model (BERT) "
                         "reads its text once, both ways, and generates nothing.",
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
    "axis.query_next": "query → prediction",
    "axis.query_ref": "query → target",
    "rows.intro": "A decoder row is the step that predicts the next token, so a decoder row is labelled with its "
                  "input and the token the model predicts there: the row {row} is where the model chose {piece}.",
    "rows.encoder_only": "An encoder-only model (BERT) has no decoder: every row is a piece of the text, and "
                         "attention runs both ways, so a row may look at the pieces after it as well as before.",
    "rows.intro_tr": "A decoder row is the step that predicts the next token. A snapshot keeps the attention, not "
                     "what the model predicted then, so here a decoder row is labelled with its input and the "
                     "reference's next token, the one training teaches it to predict ({row}).",
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
    "ov.intro": "What this checkpoint is, how your text is cut into {tokenizer} pieces, and what the model "
                "makes of it. Every other page looks inside this one forward pass.",
    "ov.arch": "Architecture as configured",
    "ov.arch.encoder_decoder": "encoder-decoder (translator)",
    "ov.arch.decoder_only": "decoder-only (causal everywhere)",
    "ov.arch.encoder_only": "encoder-only (attention both ways, no decoder)",
    "ov.arch.prefix_lm": "prefix LM (bidirectional prefix, causal after it)",
    "ov.fact": "property",
    "ov.value": "value",
    "ov.training": "Training",
    "ov.pieces": "Your text as pieces",
    "ov.pieces_help": "▁ marks a piece that starts a word (a space came before it). "
                      "Chinese characters and punctuation are words of their own.",
    "ov.bare_mark": "The piece ▁ at position {pos} ({part}) is SentencePiece's word-start mark standing alone: the "
                    "mark says a word begins here (at the start of a text, or after a space), and this "
                    "vocabulary has no piece that joins it to the Chinese character after it, so it takes a "
                    "position of its own. It spells no character; the model learned it as it learned every piece.",
    "ov.col.pos": "position",
    "ov.col.piece": "piece",
    "ov.col.id": "id",
    "ov.col.word": "word",
    "ov.col.starts": "starts a word",
    "ov.src": "Encoder input",
    "ov.tgt": "Decoder input",
    "ov.output.encoder_decoder": "Translation (greedy)",
    "ov.output.lm": "Continuation (greedy)",
    "ov.output.encoder_only": "What the model gives",
    "ov.enc.embedding": "Sentence embedding: {n} {n:number|numbers}",
    "cp.pipe_sep": ", ",
    "sidebar.layers_e": "{enc} {enc:layer|layers}",
    "pc.run": "Check against transformers",
    "pc.help": "Runs five fixed texts through this folder here and in transformers' own implementation, and "
               "compares the logits and every attention pattern.",
    "pc.running": "Running the folder in transformers…",
    "pc.estimate": "This folder is large: the check takes about {seconds} s.",
    "pc.ok": "Matches transformers",
    "pc.differs": "Differs from transformers",
    "pc.numbers": "{n} {n:text|texts}, transformers {version}: worst {what} difference {logits}, worst attention difference "
                  "{pattern} ({seconds} s)",
    "pc.what.logits": "logit",
    "pc.what.hidden_states": "hidden-state",
    "pc.ids_differ": "transformers' own tokenizer gives other ids for some of the texts.",
    "ov.empty_output": "(the model produced nothing: it ended at once)",
    "cf.line": "confidence: mean log-prob {lp} (p≈{p:.2f} per token) · {rare} of {n} {n:piece|pieces} rare",
    "cf.line_empty": "confidence: no output token to score · {rare} of {n} {n:piece|pieces} rare",
    "cf.line_ppl": " · prompt perplexity {ppl:,.1f}",
    "cf.uncalibrated": " (no thresholds for this checkpoint yet: `python -m viz_transformer calibrate`)",
    "cf.help": "The model's own confidence: the mean log-probability it gave each token of this output (0 = certain; "
               "p is the same as a probability per token), and how many pieces of the input it rarely or never saw "
               "in training (fewer than 5 times). The thresholds were chosen on the validation split; see meta.json.",
    "cf.warn": "Don't trust this output too much: {why}.",
    "cf.sep": "; ",
    "cf.why.low_confidence": "the model itself is unsure of it (mean log-prob {lp}, below {tau}: its validation "
                             "outputs under that, taken together, score under 10 BLEU, which is almost useless)",
    "cf.why.rare_input": "{rare} of the input's {n} {n:piece|pieces} {rare:is|are} rare in its training data "
                         "({unseen} never seen)",
    "cf.why.long_input": "the input has {n} {n:piece|pieces}, longer than anything it was trained on (at most {longest})",
    "cf.why.repetition": "it repeats itself (“{gram}” comes twice): a loop",
    "cf.why.unknown_char": "{ch} is not in this model's vocabulary: it reads it as {n} {n:byte|bytes}, which it "
                           "almost never translates",
    "cf.why.cut_off": "it stopped at the length limit without finishing",
    "cf.why.classifier": "its probabilities look like those of the validation outputs that were wrong (mean log-prob "
                         "{lp}, least likely token p={p:.2f}: the check's score {score:.2f} is above the "
                         "threshold {th:.2f})",
    "cf.line_bytes": " · {k} {k:character|characters} read as bytes",
    "cf.test_catch": " On the test split this check catches {r:.0%} of the bad translations (chrF under 25 or "
                     "repeating) and flags {fa:.0%} of the good ones (chrF 60 or more).",
    "cf.why.unusual_prompt": "the prompt is unlike the stories it learned from (perplexity {ppl:,.0f}, above {th:,.0f})",
    "cf.test_bleu": " On the test split, the outputs this check flags score {f:.1f} BLEU ({nf} "
                    "{nf:sentence|sentences}), the others {u:.1f} BLEU ({nu}).",
    "cf.val_lm": " It flags {f} of {n} validation {n:prompt|prompts}.",
    "ov.intro2": "The diagram is this checkpoint's own architecture, read from its config.json, with the shape of "
                 "every tensor for your text. Each layer computes (LN = {norm}, MHA = multi-head attention):",
    "ov.tok.sentencepiece": "SentencePiece",
    "ov.tok.byte_bpe": "byte-level BPE",
    "ov.tok.bpe": "BPE",
    "ov.tok.wordpiece": "WordPiece",
    "ov.ln.layer": "layer normalisation (LayerNorm)",
    "ov.ln.rms": "RMSNorm, root-mean-square normalisation",
    "ov.diagram": "The model as a diagram, with your text's shapes",
    "ov.diagram_help": "Data flows upward. One layer is drawn once inside the dashed frame; N× says how many are "
                       "stacked. Blue: the shape of the tensor on each arrow for your text ([tokens × d_model]). "
                       "Brown: what a block computes inside (heads × [queries × keys], or the feed-forward hidden "
                       "layer). Grey lines: the residual connections.",
    "ov.diagram_title": "{arch}: {layers}, {heads} {heads:head|heads}, d_model {d_model}, {norm}",
    "ov.norm_short.pre": "pre-norm",
    "ov.norm_short.post": "post-norm",
    "ov.norm.pre": "pre-norm ({norm} before each sublayer, and a final {norm})",
    "ov.norm.post": "post-norm ({norm} after each residual add)",
    "ov.open": "Open a block:",
    "ov.link": "{block} → {page}",
    "ov.settings": "Every setting",
    "ov.f.architecture": "architecture",
    "ov.f.encoder layers": "encoder layers",
    "ov.f.decoder layers": "decoder layers",
    "ov.f.heads": "heads",
    "ov.f.d_model": "d_model",
    "ov.f.d_head": "d_head (= d_k)",
    "ov.f.d_ff": "d_ff",
    "ov.f.activation": "activation",
    "ov.f.norm": "normalisation",
    "ov.f.positional": "positional encoding",
    "ov.f.max_len": "max_len",
    "ov.f.vocab": "vocabulary size",
    "ov.f.parameters": "parameters",
    "ov.m.params": "parameters",
    "ov.m.items": "training examples",
    "ov.m.time": "training time",
    "ov.m.minutes": "{m:.0f} min",
    "ov.m.epoch": "best epoch",
    "ov.m.test_bleu": "test BLEU",
    "ov.m.test_chrf": "test chrF",
    "ov.m.val_bleu": "validation BLEU",
    "ov.m.val_chrf": "validation chrF",
    "ov.m.val_perplexity": "validation perplexity",
    "ov.m.test_top1_zh": "test top-1 fill-in, Chinese",
    "ov.m.test_top5_zh": "test top-5 fill-in, Chinese",
    "ov.m.test_top1_en": "test top-1 fill-in, English",
    "ov.m.test_top5_en": "test top-5 fill-in, English",
    "ov.m.val_top1_zh": "validation top-1 fill-in, Chinese",
    "ov.m.val_top5_zh": "validation top-5 fill-in, Chinese",
    "ov.m.val_top1_en": "validation top-1 fill-in, English",
    "ov.m.val_top5_en": "validation top-5 fill-in, English",
    "ov.family.bert": "This is the tutorials' BERT, trained here: an encoder-only masked LM ({layers} {layers:layer|layers} "
                      "× {heads} {heads:head|heads}, d_model {d}) that learned from random weights to fill blanks in "
                      "both sides of {data}. It reads the whole text at once (attention both ways), starts it with "
                      "[CLS] and ends it with [SEP]; type [MASK] where a piece should go, or two sentences as "
                      "\"A [SEP] B\".",
    "ov.m.val_loss": "validation loss",
    "ov.m.train_loss": "training loss (last epoch)",
    "ov.trained": "Trained {when} on {data} ({task}).",
    "ov.task.translation": "translation",
    "ov.task.lm": "language modelling",
    "ov.task.mlm": "masked-language modelling",
    "ov.task.encoder": "sentence encoding (no trained output head)",
    "ov.loss_title": "Training loss",
    "ov.loss_x": "training step",
    "ov.loss_y": "loss",
    "ov.no_curve": "This checkpoint records no loss curve, only the final metrics above.",
    "ov.epoch_curve": "One point per epoch: the training loss at the end of each epoch, as meta.json records it.",
    "dg.input.source": "source token ids",
    "dg.input.target": "[begin] + output so far",
    "dg.input.sequence": "one sequence (token ids)",
    "dg.tok_embed": "Token embedding × √d_model",
    "dg.tok_embed.unscaled": "Token embedding",
    "dg.pos": "+ Positional encoding ({kind})",
    "dg.norm.rms": "RMSNorm",
    "dg.add_norm.rms": "Add & RMSNorm",
    "dg.final_norm.rms": "Final RMSNorm",
    "dg.ffn.gated": "Gated feed-forward ({act}(gate) × up) · d_ff {d_ff}",
    "dg.pos.rope": "none added: RoPE rotates q and k in every self-attention",
    "dg.pos.sinusoidal_halves": "sinusoidal, sines first",
    "dg.pos.sinusoidal_fairseq": "sinusoidal, fairseq's (M2M100, NLLB)",
    "dg.pos.relative": "none added: a learned bias per offset bucket and head is added to the scores",
    "dg.pos.bias": "+ Relative position bias on the scores · {h} {h:head|heads}, buckets: {b}",
    "dg.norm": "LayerNorm",
    "dg.add": "⊕ Add (residual)",
    "dg.add_norm": "Add & LayerNorm",
    "dg.self_attn": "Multi-head self-attention · {h} {h:head|heads}",
    "dg.masked_attn": "Masked multi-head self-attention · {h} {h:head|heads}",
    "dg.prefix_attn": "Multi-head self-attention (prefix mask) · {h} {h:head|heads}",
    "dg.cross_attn": "Cross-attention (K, V from the encoder) · {h} {h:head|heads}",
    "dg.ffn": "Feed-forward ({act}) · d_ff {d_ff}",
    "dg.final_norm": "Final LayerNorm",
    "dg.linear": "Linear → vocabulary ({v})",
    "dg.softmax": "Softmax → next-token probabilities",
    "dg.encoder": "Encoder",
    "dg.decoder": "Decoder",
    "dg.decoder_only": "Decoder (one sequence)",
    "dg.encoder_only": "Encoder (attention both ways)",
    "dg.seg": "+ Segment embedding (sentence A / B)",
    "dg.emb_norm": "LayerNorm (over the embeddings)",
    "dg.mlm_head": "Masked-LM head: dense, {act}, LayerNorm",
    "dg.softmax.mlm": "Softmax → the piece at each position",
    "dg.layers": "{n}×",
    "dg.heads_shape": "{h} × [{q} × {k}]",
    "dg.short.pos": "positional encoding",
    "dg.short.attn": "attention heads",
    "dg.short.qkv": "Q, K, V, √d_k, softmax",
    "dg.short.mask": "masks",
    "dg.short.cross": "cross-attention",
    "dg.short.softmax": "linear + softmax, one token at a time",
    "dg.short.embedding": "the sentence embedding",
    "dg.short.mlm": "the masked-LM head, every layer",
    "dg.short.heads": "switch heads off",

    # attention: heads and layers
    "at.title": "Attention: heads and layers",
    "at.intro": "Row = query (the token that looks), column = key (the token looked at). Each row sums to 1. "
                "This is scaled dot-product attention after its softmax:",
    "at.words": "Word level",
    "at.words_help": "Sum the attention a word's pieces receive; average the rows of a word's pieces.",
    "at.no_sink": "Hide the attention sink",
    "at.no_special": "Hide [CLS] and [SEP]",
    "at.no_special_help": "Drop the special tokens' rows and columns and divide each row's other weights by "
                          "what is left (1 − its weight on them): the attention between the words, magnified. "
                          "Not the model's own weights: it did give the special tokens their share.",
    "at.no_special_title": "{title}: renormalised without the special tokens — not the model's own weights",
    "at.sentence_a": "sentence A",
    "at.sentence_b": "sentence B",
    "at.no_sink_help": "Set every row's weight on position 0 to 0 and divide the rest by what is left (1 − that weight), "
                       "so the weights the sink drowns out show on the 0–1 scale. The model itself did give position 0 "
                       "that weight.",
    "at.no_sink_title": "{title}: renormalised without position 0 — not the model's own weights",
    "at.no_sink_note": "Position 0 ({piece}) holds {share} of this head's attention (mean over the query rows that may "
                       "also look elsewhere); below, each row is divided by the rest, so the other weights show.",
    "at.no_sink_note_heads": "Position 0 ({piece}) holds {share} of the attention of this layer's heads on average (over "
                             "the query rows that may also look elsewhere); below, each head's rows are divided by the "
                             "rest before the heads are combined.",
    "at.heatmap_title": "{block}, layer {layer}, {head}",
    "at.head_n": "head {h}",
    "at.model_view": "Model view: every layer and head",
    "at.model_view_help": "Each tile is one head's pattern (rows = queries, columns = keys). "
                          "Click a tile to open that head above.",
    "at.model_view_title": "{block}: all layers × heads",
    "at.model_view_cb": "max weight in block",
    "at.model_view_hover": "click to open",
    "at.model_view_window": "A text this long: every tile shows its head over the heatmap's window above (query rows "
                            "{qa}–{qb}, key columns {ka}–{kb}); move the window to see the rest.",
    "at.downsampled": "{n} {n:token|tokens}: each tile is shrunk to {m}×{m} {m:cell|cells} (each cell = the max of "
                      "its block).",
    "at.line_view": "Line view",
    "at.line_heads": "Heads to draw",
    "at.line_min": "Hide lines lighter than",
    "at.line_window": "Tokens shown (window)",
    "at.line_capped": "Showing queries {qa}–{qb} and keys {ka}–{kb}, at most {m} {m:line|lines} per head.",
    "at.line_title": "{block}, layer {layer}: lines from queries (left) to keys (right)",

    # step by step
    "st.title": "Attention step by step",
    "st.intro": "One head's scaled dot-product attention on your text, step by step with its real numbers: QKᵀ, "
                "divided by √d_k, plus the mask, softmax over each row, times V.",
    "st.divisor": "Divide the scores by (the model uses √d_k = {sqrt:.2f})",
    "st.divisor_unscaled": "Divide the scores by (the model uses {sqrt:.2f}: its scores are not scaled)",
    "st.divisor_help": "Smaller → softmax sharpens toward the arg-max; larger → it flattens toward uniform.",
    "st.relative": "T5 does not divide its scores: the model's divisor is 1, shown below where other models show √d_k; its relative position bias (the positional page) is added to them, so Q Kᵀ ÷ 1 below includes that bias.",
    "st.Q": "Q: queries of head {head}",
    "st.K": "K: keys of head {head}",
    "st.V": "V: values of head {head}",
    "st.QK": "Q Kᵀ (raw dot products)",
    "st.scaled": "Q Kᵀ ÷ {div:.2f}",
    "st.masked": "+ mask (grey = −∞)",
    "st.softmax": "softmax over each row = attention weights",
    "st.z": "weights × V = this head's output",
    "st.check": "These step-by-step weights vs PyTorch's own scaled_dot_product_attention on the same Q, K, V and "
                "mask, both dividing by {div:.2f} (max |difference|)",
    "st.check_other": "You changed the divisor, so these weights differ from what the model computed.",
    "st.row": "Query row to compare",
    "st.row_title": "Weights of query {q}: divisor {div:.2f} vs √d_k",
    "st.series_div": "divisor {div:.2f}",
    "st.series_model": "√d_k = {sqrt:.2f} (the model)",
    "st.series_model_unscaled": "÷ {sqrt:.2f} (the model)",
    "st.entropy": "Entropy of the row (0 = one-hot, {max:.2f} = uniform over its allowed keys)",
    "st.why": "Why divide by √d_k?",
    "st.why_text": "If q and k have independent entries with variance 1, q·k is a sum of d_k such products: "
                   "its variance grows like d_k. Large scores push softmax into saturation (one weight ≈ 1, "
                   "tiny gradients). Dividing by √d_k brings the variance back to 1.",
    "st.var_title": "Variance of q·k for random q, k vs d_k",
    "st.var_raw": "q·k",
    "st.var_scaled": "q·k ÷ √d_k",
    "st.var_y": "variance",
    "st.tab.qkv": "1 · Q, K, V",
    "st.tab.scores": "2 · Scores, mask, softmax",
    "st.tab.output": "3 · Output and one row",
    "st.tab.why": "Why √d_k?",
    "wy.title": "Why this attention",
    "wy.intro": "Where a head looks comes from one score per cell, q·k ÷ √d_k. The query and the key are both made "
                "from the residual stream, a sum of parts: the word's embedding, its position, what each earlier head "
                "and MLP wrote there, the biases. So each score is a sum of terms, one for each query part and key "
                "part. Tap a cell of the heatmap (or pick its row and column) to split its score.",
    "wy.qk_norm": "This model normalises q and k per head after the parts meet (qk_norm): its scores cannot be split "
                  "into parts.",
    "wy.heatmap_title": "{block}, layer {layer}, head {head}: tap a cell",
    "wy.tap_note": "A click on a cell splits its score. On a phone the first tap names the cell and a second tap "
                   "picks it.",
    "wy.query": "Query (row)",
    "wy.key": "Key (column)",
    "wy.tab.score": "1 · Why this score",
    "wy.tab.logit": "2 · Which heads write the word",
    "wy.tab.circuits": "3 · The head alone",
    "wy.detail": "Group the parts",
    "wy.detail.kind": "word · position · context",
    "wy.detail.layer": "by layer",
    "wy.detail_help": "word: the token's embedding; position: its positional vector; context: what the earlier "
                      "heads and MLPs wrote at that position (by layer: each layer's own); bias: the projections' "
                      "and norms' biases. Each norm's scale is frozen at the value this run computed.",
    "wy.g.word": "word",
    "wy.g.position": "position",
    "wy.g.segment": "segment",
    "wy.g.context": "context",
    "wy.g.bias": "bias",
    "wy.g.layer": "layer {layer}",
    "wy.g.extra": "relative position bias",
    "wy.g.sum": "Σ",
    "wy.terms_title": "“{qp}” → “{kp}”: score {score:.2f}, weight {weight:.2f}",
    "wy.axis.query_parts": "query's parts",
    "wy.axis.key_parts": "key's parts",
    "wy.axis.score": "score",
    "wy.cb.term": "term",
    "wy.story.word": "**“{qp}” and “{kp}” match through their words**: the word × word term gives {value:+.2f} "
                     "of the score {score:.2f}.",
    "wy.story.pair": "**The largest term is the query's {qg} against the key's {kg}**: {value:+.2f} of the score "
                     "{score:.2f}.",
    "wy.story.position": "The terms with a position on either side add {position:+.2f}.",
    "wy.story.rope": "Position acts by rotating q and k (RoPE): it is inside every term, not a term of its own.",
    "wy.story.relative": "The relative position bias adds {extra:+.2f}.",
    "wy.masked": "This key is masked for this query: whatever its score, its weight is 0.",
    "wy.no_runner_up": "This row sees no other key: there is nothing to compare.",
    "wy.gap_title": "The score of “{win}” and of “{other}”, by the key's parts",
    "wy.gap": "**“{win}” gets {gap:.2f} more score than “{other}”** (weight {w_win:.2f} against {w_other:.2f}); the "
              "largest part of the gap comes from the key's {group} ({value:+.2f}).",
    "wy.check": "The terms add up to {total:.4f}; the model computed {score:.4f}.",
    "wy.no_output": "An encoder-only model writes no output word (its masked-LM head is not linear): no logit is split "
                    "here.",
    "wy.step": "Output word",
    "wy.versus": "Compare with",
    "wy.versus_none": "nothing: the logit itself",
    "wy.grid_title": "Each head's direct push on the logit of “{piece}”",
    "wy.grid_title_vs": "Each head's push on “{piece}” minus its push on “{other}”",
    "wy.grid_self": "L{layer} self",
    "wy.grid_cross": "L{layer} cross",
    "wy.grid_hover": "its output through the final norm and the unembedding",
    "wy.head_self": "L{layer}.H{head}",
    "wy.head_cross": "L{layer}.X{head}",
    "wy.cb.logit": "logit",
    "wy.logit_story": "The heads that push “{piece}” up most directly: {heads}. All parts add up to {total:.2f}; the "
                      "model's logit is {logit:.2f}.",
    "wy.logit_story_vs": "What makes “{piece}” beat “{other}” most: {heads}. All parts together give {total:+.2f}; "
                         "the model's two logits differ by {logit:+.2f}.",
    "wy.logit_note": "Direct effect: each part's vector after the last layer, through the final norm (its scale frozen) "
                     "and the unembedding. A head also acts through later layers; that is not counted here.",
    "wy.circuits_intro": "From the weights alone, no text: what this head does with positions and with words.",
    "wy.copy": "Words whose own logit this head raises into its top {k}",
    "wy.copy_value": "{share} of {n} {n:word|words}",
    "wy.copy_help": "Each word's embedding through this head's value and output matrices and the unembedding: a "
                    "copying head (it writes the word it reads) scores high.",
    "wy.qk_pos_title": "Position i's query against position j's key, no words",
    "wy.axis.q_pos": "query position",
    "wy.axis.k_pos": "key position",
    "wy.cb.score": "score",
    "wy.no_qk_pos.rope": "This model's positions are no vectors of their own (RoPE rotates q and k): there is no "
                         "position-only circuit to show.",
    "wy.no_qk_pos.relative": "This model's positions are no vectors of their own (a relative position bias is added to "
                             "the scores): there is no position-only circuit to show.",
    "axis.d_head": "d_head dimension",
    "axis.d_k": "d_k",

    # masks
    "mk.title": "Masks",
    "mk.intro": "A mask says which keys each query may use: masked scores become −∞ before softmax, so "
                "their weights are exactly 0. Blue = may attend, grey = masked. The causal mask M:",
    "mk.padding": "Padding mask",
    "mk.padding_help": "Your text is batched with a second sentence; the shorter one is filled with [pad], "
                       "and no query may attend to a [pad] key. The figure shows the padded row.",
    "mk.no_pad": "This model has no padding token: its texts are never padded, so there is no padding mask to show.",
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
    "mk.prefix_title": "Prefix-LM mask, prefix = {p} {p:token|tokens}",
    "mk.prefix_layout": "Your sentence laid out as a prefix-LM translator sees it: one sequence [begin] + source + "
                        "[sep] + translation. The prefix is the first {p} {p:position|positions} ([begin], the source, [sep]); "
                        "the slider tries other lengths.",
    "mk.prefix_layout_lm": "The prefix is the prompt ([begin] + your text, the first {p} {p:position|positions}); the "
                           "continuation after it is causal. The slider tries other lengths.",
    "mk.cross": "Cross-attention mask",
    "mk.cross_help": "Decoder queries look at encoder keys: only the source's [pad] keys are masked.",
    "mk.cross_title": "Cross-attention mask captured at {hook} (row {row} of the batch)",
    "mk.cross_none": "A decoder-only model has no cross-attention.",
    "mk.cross_none_encoder": "An encoder-only model has no decoder, so no cross-attention.",
    "mk.both_ways": "An encoder-only model (BERT) has no causal mask: every piece may attend to every real "
                    "piece, before and after it; padding is its only mask.",
    "mk.applied": "What each head actually applied",
    "mk.applied_help": "From your run's capture: the mask (hook_mask), the scores before it (hook_scores), "
                       "after it, and the resulting pattern (hook_pattern).",
    "mk.mask_title": "{hook}",
    "mk.before": "Scores before the mask (head {head})",
    "mk.after": "Scores after the mask (head {head}; grey = −∞)",
    "mk.pattern": "Pattern after softmax (head {head})",
    "mk.tab.padding": "Padding and cross-attention",
    "mk.tab.causal": "Causal and prefix-LM",
    "mk.tab.applied": "What each head applied",
    "cb.score": "score",

    # positional
    "pe.title": "Positional encoding",
    "pe.intro": "Attention alone ignores order; a position vector is added to every token embedding. "
                "The sinusoidal encoding:",
    "pe.uses": "This checkpoint uses **{kind}** positions (d_model = {d}, max_len = {L}).",
    "pe.n": "Positions shown",
    "pe.sin_title": "Sinusoidal encoding: {n} {n:position|positions} × {d} {d:dimension|dimensions}",
    "pe.learned_title": "Learned position embeddings of this checkpoint",
    "pe.dims": "Dimensions to draw as curves",
    "pe.curves_title": "Chosen dimensions over position",
    "pe.dim_n": "dim {d}",
    "pe.sim_title": "Dot product PE(i)·PE(j) ({kind})",
    "pe.offset_title": "PE(p)·PE(p+δ) for several starting positions p ({kind})",
    "pe.offset_note": "For the sinusoidal table the curves lie on top of each other: the product depends "
                      "only on the distance δ, not on where you start.",
    "pe.segments": "This model also adds a segment embedding to every piece: one learned row for sentence A, "
                   "another for sentence B ({n} {n:row|rows} in all), so the same word reads differently in "
                   "the two sentences of a pair.",
    "pe.segments_title": "Segment (token_type) embeddings",
    "pe.segment": "segment",
    "pe.anchor": "p = {p}",
    "pe.offset": "distance δ",
    "pe.kind.sinusoidal": "sinusoidal",
    "pe.kind.learned": "learned",
    "pe.kind.rope": "rotary (RoPE)",
    "pe.kind.sinusoidal_halves": "sinusoidal (sines first)",
    "pe.kind.sinusoidal_fairseq": "sinusoidal (fairseq's: M2M100, NLLB)",
    "pe.kind.relative": "relative (a learned bias on the scores, T5)",
    "pe.rope.intro": "Nothing is added to the embeddings. In every self-attention, RoPE rotates each head's q and k: the pair of dimensions (i, i + d/2) turns by the angle pos · θᵢ, θᵢ = {theta}^(−2i/{d}) (scaling: {kind}). The dot product of a rotated q and k then depends on their positions only through the offset i − j.",
    "pe.rope.angles_title": "cos(pos · θᵢ) for {n} {n:position|positions} × {h} dimension {h:pair|pairs}",
    "pe.rope.pair": "dimension pair i",
    "pe.rope.kept": "q and k both moved by s (offset {d} kept)",
    "pe.rope.moved": "only q moved by s",
    "pe.rope.scores_title": "Layer {layer}, head {head}: this model's own q and k, scored at shifted positions",
    "pe.rope.shift": "shift s (positions)",
    "pe.rope.note": "The flat line is the score this head computed (hook_scores) for the chosen query and key: moving both by the same number of positions leaves it unchanged, moving only the query changes it.",
    "pe.rel.intro": "Nothing is added to the embeddings. Each head adds a learned number to every score q·k (which T5 does not divide by √d): one number per bucket of the offset key − query, {b} {b:bucket|buckets}, offsets beyond {m} sharing the last. Layer 0 of each stack holds the numbers; every layer of that stack adds the same bias.",
    "pe.rel.rope": "Unlike RoPE, which rotates q and k so that their dot product depends on the offset, here q and k are left as they are: the offset's effect is a learned scalar per offset bucket and head, added after the dot product.",
    "pe.rel.stack": "Stack",
    "pe.rel.encoder": "encoder (both ways)",
    "pe.rel.decoder": "decoder (causal)",
    "pe.rel.max": "Largest offset shown",
    "pe.rel.offset": "offset: key position − query position",
    "pe.rel.head": "head {h}",
    "pe.rel.by_offset_title": "Bias each head adds, by offset ({part})",
    "pe.rel.bucket": "bucket",
    "pe.rel.buckets_title": "The bucket of each offset ({b} {b:bucket|buckets})",
    "pe.rel.buckets_note": "Offsets below {e} each have a bucket of their own (the steps of one); farther ones share buckets that grow logarithmically, up to {m}, beyond which all share the last. A causal decoder never looks ahead, so it only has offsets ≤ 0.",
    "pe.rel.matrix_title": "Head {head}: the bias added to the scores for this text ({n} {n:piece|pieces})",
    "pe.rel.matrix_note": "Each cell is the bias for that query and key, read from its offset's bucket: the same along every diagonal. The decoder's cells above the diagonal are masked out afterwards.",
    "cb.bias": "bias",
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
    "dc.chosen": "Step {i}: the query of {query} chose {piece} (p = {p})",
    "dc.cands_title": "Top candidates at step {i}",
    "dc.reads": "Where the {heads} cross-attention {heads:head|heads} (all layers) {heads:looks|look} hardest at this "
                "step: {items}",
    "dc.cross_title": "Cross-attention of the newest query, {query}, layer {layer}",
    "dc.self_title": "Self-attention of the newest query, {query}, layer {layer}",
    "dc.beams": "Beams",
    "dc.beam_title": "Beam search up to step {i}: filled = extended, hollow = dropped, diamond = finished",
    "dc.extended": "extended",
    "dc.dropped": "dropped",
    "dc.finished": "finished",
    "dc.done": "Finished: {text}",
    "dc.cut": "To leave room for {new} new {new:token|tokens}, the prompt was cut: its first {n} {n:piece|pieces} "
              "{n:is|are} not used here.",
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
    "ko.n_off": "{n} of {total} {total:head|heads} knocked out.",
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
    "ko.blank_what": "An encoder-only model generates nothing: knock-out measures the change in log p of the model's "
                     "top piece at the first blank ({piece} at position {i}).",
    "ko.blank_none": "An encoder-only model generates nothing: knock-out measures its masked-LM prediction at a blank. "
                     "Type {mask} in the text where a word should go.",
    "ko.blank_no_head": "An encoder-only model generates nothing, and this one has no masked-LM head: there is no "
                        "prediction here for a knock-out to change.",
    "ko.blank_before": "log p before",
    "ko.blank_after": "log p after",
    "ko.blank_top_after": "Best piece after the knock-out: {piece}",
    "ko.col.blank_changed": "best piece changes",
    "ko.rank_help_blank": "Δ log-probability: how much less likely the model's top piece at the blank becomes when only "
                          "that head is knocked out (more negative = the head matters more). Click a cell to knock that "
                          "head out.",
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
    "po.order_help": "The text's own pieces, moved around (never re-tokenized): the special tokens, punctuation and "
                     "a lone ▁ stay where they are. Try 我喜欢你。: swapping its first and last word piece gives "
                     "exactly the pieces of 你喜欢我。.",
    "po.how": "Permutation",
    "po.how.reverse": "reverse the word pieces",
    "po.how.swap": "swap the first and last word piece",
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
    "cp.intro": "Your text (sidebar) and a second one through the same head, side by side; when they have as many "
                "pieces, their difference too.",
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

    # one-sequence translators (decoder-only, prefix LM)
    "dc.intro.sequence": "The prompt is [begin] + your text + [sep]; the model continues it with the translation, "
                         "one token per step, until [end] — one sequence, no encoder.",
    "at.segments": "One sequence holds both languages: positions 0–{a} are [begin] and the source, {b} is [sep], "
                   "the translation starts at {c}. The dotted lines mark the parts.",
    "ar.part.source": "source",
    "ar.part.target": "[sep] + target",
    "mk.prefix_applied": "The prefix mask this model applied (its decoder.0.self_attn.hook_mask): bidirectional over "
                         "the {p} {p:position|positions} of [begin] + source + [sep], causal after {p:it|them}.",

    # compare architectures
    "ar.title": "Compare architectures",
    "ar.intro": "The same sentence through three translators: an **encoder-decoder** (an encoder reads the source, "
                "a decoder writes the target and reads the source through cross-attention), a **decoder-only** "
                "model (one causal sequence `[begin] source [sep] target [end]`) and a **prefix LM** (the same "
                "sequence, but the source prefix attends both ways).",
    "ar.fair": "They were trained on the same data, with the same split, about the same number of parameters and the "
               "same training budget, so what differs between them comes from the architecture.",
    "ar.fair_but": "They were trained on the same data, with the same split, about the same number of parameters "
                   "and the same training budget, but not every difference between them is the architecture's: {items}.",
    "ar.diff.sep": "; ",
    "ar.diff.norm": "{post} puts each layer norm after the residual addition (post-norm), {pre} before it (pre-norm)",
    "ar.diff.schedule": "after the warm-up the learning rate falls as 1/√step for {inverse_sqrt} (the original "
                        "Transformer's schedule), along a cosine for {cosine}",
    "ar.and": " and ",
    "ar.need": "This page needs at least two translator checkpoints of different architectures (found: {have}).",
    "ar.unfair": "These translators were not trained on one recipe (the same data, split and number of updates), so their differences are not only the architecture's. Train them with the same settings to compare the architectures fairly.",
    "ar.using": "A language model is selected: comparing the translators on “{text}”.",
    "ar.depth": "Layer",
    "ar.depth.first": "first layer",
    "ar.depth.last": "last layer",
    "ar.checkpoint": "{name} · {n:,} parameters",
    "ar.trust.weak": "Too small or too undertrained to trust on this sentence: it is unsure here, and its test BLEU is "
                     "only {bleu} after {epochs} {epochs:epoch|epochs} (under 20: even the gist is hard to get).",
    "ar.trust.unsure": "Not to be trusted on this sentence: a good model in general (test BLEU {bleu}), but unsure here.",
    "ar.row.output": "The translation each one produced (greedy)",
    "ar.row.reads": "Where the target reads the source",
    "ar.row.reads_help": "Rows: the positions that predict each target token ([begin] or [sep], then the target). "
                         "Columns: the source pieces. Mean over heads. The encoder-decoder reads the source through "
                         "cross-attention; the other two through the source columns of their self-attention.",
    "ar.row.masks": "The mask each one applied (layer 0, captured)",
    "ar.reads.cross": "{arch}: cross-attention, layer {layer}",
    "ar.reads.self": "{arch}: self-attention, layer {layer}",
    "ar.target_axis": "target position (predicts the next token)",
    "ar.mask": "{arch}: {hook}",
    "ar.differs": "**What differs and why.** The encoder-decoder keeps two sequences: its encoder sees the whole "
                  "source in both directions, and every target token reads the source through a separate "
                  "cross-attention block. The decoder-only model has one causal sequence, so a source piece cannot "
                  "see the pieces after it, and the target reads the source through the same self-attention it "
                  "uses for its own words (its rows also spend weight on [begin], [sep] and earlier target pieces, "
                  "so they sum to less than 1). The prefix LM lets the source see itself both ways, as an encoder "
                  "would, while the target stays causal: one set of weights, two kinds of attention.",
    "ar.rank": "Causal attention is full rank",
    "ar.rank_intro": "A causal pattern is lower-triangular and every query may attend to itself, which softmax "
                     "gives a weight above 0: the diagonal is positive, so the determinant (the product of the "
                     "diagonal) is not 0 and the matrix has full rank. A bidirectional pattern has no such "
                     "guarantee: when rows look alike it collapses toward rank 1. The **effective rank** "
                     "(exp of the entropy of the normalised singular values) measures it: n for n equal singular "
                     "values, 1 for a rank-one matrix. The dashed mark is the size n of each pattern.",
    "ar.rank_title": "Effective rank of every head's pattern on “{text}”",
    "ar.rank_x": "model · attention block",
    "ar.rank_y": "effective rank",
    "ar.spectra_title": "Singular values of each head's pattern ({depth}), divided by the largest",
    "ar.sv_x": "singular value rank (largest first)",
    "ar.sv_y": "singular value ÷ largest (log)",
    "ar.rank_why": "Read the table: `causal` says whether the block's mask was lower-triangular; a causal block's "
                   "smallest singular value is never exactly 0 (its diagonal is positive), but it can be tiny when "
                   "a piece gives itself almost no weight, so a full-rank pattern can still be close to a "
                   "lower-rank one; a bidirectional block has no such floor. "
                   "This is the tutorials' argument for decoder-only models (a full-rank attention matrix keeps "
                   "more expressive power), shown on this sentence; it is not a proof that they translate better.",
    "ar.tab.reads": "Output and where it reads the source",
    "ar.tab.masks": "Masks",
    "ar.tab.rank": "Rank",
    "ar.tab.norm": "Pre- vs post-norm",
    "ar.norm": "Where the norm sits: before the sub-layer or after the residual",
    "ar.norm_intro": "Each sub-layer of a **pre-norm** model reads a normalised copy and adds its result back, x + f(LN(x)), with one more norm at the very end. The original Transformer is **post-norm**: it normalises after the residual, LN(x + f(x)). Xiong et al. (2020) showed that at initialisation a post-norm model's gradients grow towards the output, which is why it needs a learning-rate warm-up.",
    "ar.norm_all_pre": "Every model here is pre-norm. Below, the measurement at initialisation on this project's own encoder-decoder: the same configuration and training batch, freshly initialised with the norm in each place.",
    "ar.norm_lone_post": "**{post}** is post-norm, with no pre-norm twin yet (below). First, the measurement at initialisation on this project's own encoder-decoder: the same configuration and training batch, freshly initialised with the norm in each place.",
    "ar.norm_has_twin": "**{post}** is **{pre}**'s post-norm twin: the same data, split, vocabulary, size, seed and number of updates, with the norm after the residual. Below: the measurement at initialisation, then the two training runs side by side.",
    "ar.twin": "The two runs side by side",
    "ar.twin_pre": "pre-norm ({name})",
    "ar.twin_post": "post-norm ({name})",
    "ar.twin_reads": "**What the runs show.** Best validation BLEU: post-norm **{post_best:.1f}** (update {post_best_step:,}), pre-norm **{pre_best:.1f}** (update {pre_best_step:,}): a difference of {diff:+.1f}. Post-norm first reached {level:.1f} BLEU (90% of the lower best) after {post_to:,} {post_to:update|updates}, pre-norm after {pre_to:,}. At the end of the warm-up (update {warmup:,}) the training loss was {post_loss_s} for post-norm and {pre_loss_s} for pre-norm.",
    "ar.twin_no_curve": "{pre} or {post} keeps no validation curve in its meta.json, so the runs cannot be compared here.",
    "ar.twin_no_snapshots": "The two runs share no recorded training step, so their attention cannot be shown at the same step.",
    "ar.twin_step": "training step (both runs)",
    "ar.twin_loss": "Training loss (smoothed) of both runs",
    "ar.twin_bleu": "Validation BLEU after each epoch",
    "ar.twin_bleu_y": "validation BLEU",
    "ar.twin_same": "The same sentence, `{name}`, {head}, at the same training step ({step:,}) in both models; rows say what each step predicts next.",
    "ar.twin_x": "training step (update)",
    "ar.twin_heat": "{model}, step {step:,}",
    "ar.norm_fig": "Gradient norm of each layer at initialisation ({name}'s configuration, {n} training {n:pair|pairs}, mean of "
                   "{seeds} {seeds:initialisation|initialisations})",
    "ar.norm_x": "layer (input → output)",
    "ar.norm_y": "‖gradient of the layer's parameters‖",
    "ar.norm_pre": "pre-norm: x + f(LN(x))",
    "ar.norm_post": "post-norm: LN(x + f(x))",
    "ar.norm_reads": "**What it shows.** From {first} to {last}, post-norm's layer gradient changes by ×{post_growth:.2f} "
                     "and pre-norm's by ×{pre_growth:.2f}. At the output side ({last}) post-norm's gradient is "
                     "{at_output:.2f}× pre-norm's; at the input side ({first}) {at_input:.2f}×.",
    "ar.norm_none": "This checkpoint has no gradient measurement at initialisation in its meta.json; `{cmd}` adds it.",
    "ar.twin_none": "No post-norm translator is among the checkpoints yet, so only the measurement at "
                    "initialisation can be compared here: its training run (loss, BLEU and attention over training "
                    "beside the pre-norm model's) is still to come.",
    "ar.twin_missing": "**{post}** is post-norm, but no pre-norm model here was trained on its recipe (its data, split, pieces and budget), so its training run has no twin to stand beside. Its learning-rate sweep is the fair comparison: both norm placements, the same settings, the same short budget.",
    "ar.sweep": "Post-norm and pre-norm over a learning-rate sweep",
    "ar.sweep_fig": "Validation BLEU over {epochs} {epochs:epoch|epochs}",
    "ar.sweep_x": "epoch",
    "ar.sweep_line": "{norm} · {setting}",
    "ar.sweep_setting": "{schedule}, peak {lr}, warm-up {warmup:,}",
    "ar.sweep_short": "{schedule} {lr} / {warmup:,}",
    "ar.sweep_reads": "**What the sweep shows.** After {epochs} {epochs:epoch|epochs} ({updates:,} {updates:update|updates}; BLEU of greedy translations of {val_pairs} validation {val_pairs:pair|pairs}), pre-norm minus post-norm was {lead_min:+.1f} to {lead_max:+.1f} BLEU: pre-norm led on {pre_led} of {n} {n:setting|settings}. Post-norm did best with {picked}. Trained with it for the full budget, **{name}** reaches **{val:.1f}** validation BLEU and **{test:.1f}** on the test pairs.",
    "ar.sweep_old": "The post-norm model it replaced (zh-en-v1's pieces, and the pre-norm recipe's cosine schedule: warm-up 800, peak 7e-4) reached {old_val:.1f} and {old_test:.1f}. The pre-norm twin on the picked schedule is not trained yet, so the two full-budget runs are not compared like for like.",
    "ar.sweep_col.schedule": "schedule",
    "ar.sweep_col.lr": "peak rate",
    "ar.sweep_col.warmup": "warm-up (updates)",
    "ar.sweep_col.post": "post-norm BLEU",
    "ar.sweep_col.pre": "pre-norm BLEU",
    "ar.sweep_col.lead": "pre − post",
    "ar.short.encoder_decoder": "enc-dec",
    "ar.short.decoder_only": "decoder-only",
    "ar.short.prefix_lm": "prefix LM",
    "ar.short.encoder_only": "encoder-only",
    "ar.col.model": "model",
    "ar.col.block": "attention block",
    "ar.col.heads": "heads",
    "ar.col.n": "n (pattern size)",
    "ar.col.m": "m (pieces measured)",
    "ar.rank_window": "Past {m} {m:piece|pieces} the singular values are measured on {m} evenly spaced {m:piece|pieces} (the same ones as queries and keys, so a causal pattern stays triangular): an SVD costs n³, and 150 of them at 512 pieces took seconds.",
    "ar.col.causal": "causal",
    "ar.col.effective_rank": "effective rank (mean)",
    "ar.col.smallest_sv_ratio": "smallest singular value ÷ largest",

    # attention over training
    "tr.title": "Attention over training",
    "tr.intro": "While this model trained, fixed sentences were run through it at log-spaced steps from the run's "
                "step 0 to its end, teacher-forced on fixed reference translations so every frame has the same "
                "tokens. Slide or play through training: watch attention change.",
    "tr.start_random": "This run trained from scratch: step 0 is the model before any update, with random weights.",
    "tr.start_finetune": "Step 0 is not random weights: this run is a fine-tune that starts from {base}'s weights "
                         "after {n:,} {n:update|updates} ({chain}), so its heads have already formed at the first frame. "
                         "Playbacks from random weights: {others}.",
    "tr.chain_link": "{name}: {n:,}",
    "tr.none": "{name} has no recorded training snapshots (training_snapshots.json). Checkpoints that have them: "
               "{have}.",
    "tr.sentence": "Sentence → fixed reference",
    "tr.step": "Training step (★ = the weights that ship)",
    "tr.m_step": "step",
    "tr.m_loss": "training loss",
    "tr.m_bleu": "validation BLEU ({n} {n:pair|pairs})",
    "tr.m_shipped": "shipped step",
    "tr.translation": "The model's greedy translation at this step",
    "tr.mlm_note": "While this masked LM trained, fixed sentences, each with a [MASK], were run through it at "
                   "log-spaced steps from the run's step 0 to its end, so every frame reads the same pieces; under the "
                   "step you see its best piece for each blank. Slide or play through training: watch attention change.",
    "tr.sentence_mlm": "Sentence with a blank",
    "tr.m_fill_top5": "top-5 fill-in, % ({n} {n:sentence|sentences})",
    "tr.fills": "The model's best piece at each [MASK] at this step",
    "tr.curves_mlm": "Loss and fill-in accuracy over training (the red line: this step)",
    "tr.heatmap": "{name}, {head}, step {step}",
    "tr.model_view": "All heads of {block}, step {step}",
    "tr.curves": "Loss and BLEU over training (the red line: this step)",
    "tr.x": "training step (log scale; step 0 drawn at 0.5)",
    "tr.how": "{n} {n:snapshot|snapshots}, stored in the checkpoint folder as float16 (training_snapshots.safetensors + .json), "
              "read with viz_transformer.training.snapshots.load_training_snapshots.",
    "tr.roles": "Roles as they form",
    "tr.roles_intro": "Each head's role at every recorded step, from the same head statistics as the Head statistics "
                      "page (averaged over the {n} fixed {n:sentence|sentences}): previous token, first token, self, end token or "
                      "broad, when its statistic carries at least {th:.0%} of the weight. The number in each cell is "
                      "the evidence: the role's statistic (for broad: the entropy, in nats), or the largest one when "
                      "no role is clear (grey). The red frame is the step shown above.",
    "tr.roles_fig": "Roles of the heads of {block} over training",
    "tr.roles_x": "training step",
    "tr.roles_y": "layer, head",
    "tr.roles_none": "none clear",
    "tr.roles_first": "When each role appears (the first step from which a head keeps it to the end):",
    "tr.roles_first_row": "- **{role}**: layer {layer}, head {head}, from step {step:,} ({evidence}; at the end: {final})",
    "tr.roles_nothing": "No head of {block} keeps a clear role to the end of training: at the last step every head "
                        "spreads its weight (the grey cells' numbers show how far each stays below {th:.0%}).",
    # figures everywhere
    "w.choose": "Choose an option",
    "fig.window": "Positions shown (a window of {m}: smaller cells would be unreadable)",
    "fig.window_note": "Showing query rows {qa}–{qb} and key columns {ka}–{kb}; move the slider for the rest. Every number is computed over the whole text.",
    "fig.find": "Find in the text",
    "fig.find_help": "Type a word or a piece of the text and press Enter: the window moves to where it first appears.",
    "fig.find_placeholder": "a word or piece",
    "fig.find_none": "“{q}” is not in this text's pieces.",
    "fig.html": "HTML",
    "fig.html_help": "Download this figure as one HTML file that works offline (PNG: the camera in its toolbar).",

    # rollout and attribution
    "ro.title": "Rollout and attribution",
    "ro.intro": "Attention summarised across all heads and layers: where information in a position may have come from.",
    "ro.method": "How",
    "ro.method_md": "**Attention rollout** (Abnar & Zuidema 2020). For every layer l take the mean over heads of its "
                    "attention A_l, mix it half-and-half with the identity (the residual connection carries the "
                    "token itself on): Â_l = ½·mean_heads(A_l) + ½·I, renormalise each row to sum 1, and multiply "
                    "through the layers: rollout = Â_L · Â_(L−1) ⋯ Â_1. Row = query, column = key; each row sums to 1."
                    "\n\n**Source attribution** (translators): the last decoder layer's mean cross-attention "
                    "[target × source] times the encoder rollout [source × source]: each target token's relevance "
                    "over the source pieces.",
    "ro.limits_md": "**Limits.** Attention is not explanation (Jain & Wallace 2019): heads that look at a token need "
                    "not be what decides the output, and other weightings give other pictures. Rollout assumes the "
                    "residual stream carries exactly half at every layer, averages heads as if equally important, and "
                    "ignores the feed-forward layers and value vectors. Read it as where information *may* flow; "
                    "test a claim with **Knock out heads**.",
    "ro.rollout_title": "Rollout of the {block}",
    "ro.attr_title": "Source attribution: each target token over the source pieces",
    "ro.lm_note": "This model keeps everything in one sequence: rows after the prompt are the generated tokens, "
                  "and their columns over the prompt are its attribution.",
    "ro.csv": "Download as CSV",
    "ro.csv_rows": "Download rows {qa}–{qb} as CSV (every key)",
    "cb.relevance": "relevance",

    # head statistics
    "hs.title": "Head statistics",
    "hs.intro": "What each head does on average: one row per head of every attention block, each number averaged "
                "over the query rows that are not padding (and over the sentences of a corpus).",
    "hs.source": "Measure on",
    "hs.source.text": "this text",
    "hs.source.builtin": "built-in held-out corpus",
    "hs.source.own": "your own sentences",
    "hs.builtin_help": "{n} {n:sentence|sentences} the model never trained on ({lang}); "
                       "see viz_transformer/training/corpora/SOURCES.md.",
    "hs.lang.zh": "Chinese: Tatoeba test sources and 3AM captions",
    "hs.lang.en": "English: held-out TinyStories sentences",
    "hs.upload": "Upload a text file (one sentence a line)",
    "hs.paste": "…or paste sentences, one a line",
    "hs.bad_file": "That file is not UTF-8 text: {error}",
    "hs.too_many": "This corpus has {n} {n:sentence|sentences}; a corpus here holds at most {most}. The command line "
                   "reads any length: `viz-transformer stats --corpus FILE` (or attribution).",
    "hs.run": "Measure over {n} {n:sentence|sentences}",
    "hs.not_yet": "Press the button to measure every head over the corpus (cached afterwards).",
    "hs.defs": "What the numbers mean",
    "hs.threshold": "Label a role when its statistic is at least",
    "hs.threshold_help": "A head is labelled previous-token, first-token sink, end-token sink or self when that "
                         "weight (averaged) reaches this value; broad when its entropy is at least 80% of the "
                         "entropy of spreading evenly. The number behind each label is in the evidence column.",
    "hs.stat": "Statistic for the grids",
    "hs.grid_title": "{block}: {stat} per head",
    "hs.grid_hover": "click to open on the attention page",
    "hs.no_grid.cross": "No {stat} grid for the {block}: its queries are target positions and its keys source "
                        "positions, two different sequences, so a query has no own or previous position among its keys.",
    "hs.no_grid": "No {stat} grid for the {block}: no head has a value for it on this text (too few positions).",
    "hs.sink": "Attention sinks: the first position",
    "hs.sink_caption": "Each head's share of attention on position 0, on this text, over the query rows that could look "
                       "elsewhere too: many heads park their attention there when nothing else is relevant.",
    "hs.sep_title": "Each head's share on the closing special pieces ({piece}, {n} in this text)",
    "hs.sep_cb": "share on them",
    "hs.sink_title": "{block}: share of attention on position 0 ({piece})",
    "hs.sink_cb": "share on position 0",
    "hs.sink_strongest": "Strongest: layer {layer}, head {head} puts {share} of its attention on position 0 ({piece}); "
                         "its next most attended position is {k} ({other}), {other_share}.",
    "hs.csv": "Download the table as CSV",
    "hs.n": "Measured over {n} {n:sentence|sentences}.",
    "hs.col.role": "role",
    "hs.col.evidence": "evidence",
    "hs.col.n_sentences": "sentences",
    "hs.ev.stat": "{stat} = {v}",
    "hs.ev.broad": "entropy = {v} of {max} possible",
    "hs.ev.none": "none clear (largest: {stat} = {v})",
    "hs.stat.entropy": "entropy",
    "hs.stat.mean_distance": "mean distance",
    "hs.stat.self": "self",
    "hs.stat.prev_token": "previous token",
    "hs.stat.first_token": "first token",
    "hs.stat.last_token": "last token",
    "hs.stat.punctuation": "punctuation",
    "hs.stat.max_weight": "max weight",
    "hs.stat.max_entropy": "max entropy",
    "hs.def.entropy": "−Σ_k p·ln p (nats): 0 = one key, ln n = spread evenly over n keys",
    "hs.def.mean_distance": "Σ_k p_qk·|q − k| (cross-attention: q = target position, k = source position)",
    "hs.def.self": "p_qq, the weight on the query's own position (self-attention only)",
    "hs.def.prev_token": "p_q,q−1, the weight on the previous position, over q ≥ 1 (self-attention only)",
    "hs.def.first_token": "p_q0, the weight on the first key",
    "hs.def.last_token": "the weight on the last key the row may attend to (the source's [end]; in causal "
                         "attention that is the query itself, so it equals self)",
    "hs.def.punctuation": "the total weight on punctuation pieces",
    "hs.def.max_weight": "max_k p_qk, the heaviest key",
    "hs.def.max_entropy": "ln(allowed keys): the entropy a row spread evenly would have (reference for "
                          "entropy)",
    "hs.role.previous-token": "previous-token",
    "hs.role.first-token sink": "first-token sink",
    "hs.role.self": "self",
    "hs.role.end-token sink": "end-token sink",
    "hs.role.broad": "broad",

    # export
    "ex.title": "Export and report",
    "ex.intro": "Take the current run with you: every captured tensor by its capture name, or one HTML report "
                "for students that opens offline.",
    "ex.run": "The run's tensors",
    "ex.run_help": "Keys are the capture names (e.g. decoder.0.cross_attn.hook_pattern) plus `tokens.src`, "
                   "`tokens.tgt` and `output`; the JSON also has shapes and dtypes. Same files as "
                   "`python -m viz_transformer trace --out run.npz`.",
    "ex.npz": "Download .npz",
    "ex.json": "Download .json",
    "ex.large": "This run's tensors are {gb:.1f} GB at full size: the .npz leaves out {n} {n:capture|captures} of "
                "attention scores and patterns, which `viz_transformer.export.read_run` computes back from q, k, v "
                "and the mask.",
    "ex.json_too_large": "Too large for JSON text: take the .npz.",
    "ex.report": "Report",
    "ex.report_help": "One HTML file: the text, its tokens, the model view of every block, the heads you pick, "
                      "rollout or source attribution, the output and the greedy decoding steps. Plotly's JS is "
                      "inside (no internet needed); about 5 MB.",
    "ex.heads": "Heads to draw in full",
    "ex.head_option": "{block}, L{layer}·H{head}",
    "ex.download_report": "Download the report (.html)",
    "ex.figures": "Every figure in the app has a PNG button (camera) in its toolbar and an HTML button under it; "
                  "every table has a CSV download in its toolbar.",
    # logit lens
    "nav.lens": "Logit lens",
    "ln.title": "Logit lens: when does the model know?",
    "fb.title": "Fill in the blank",
    "fb.intro": "The masked-LM head's best pieces at each mask, then the same head read after every layer "
                "(its dense layer, activation and norm, then the unembedding): early rows are a rough reading.",
    "fb.at": "At position {i} ({piece}):",
    "fb.col.piece": "piece",
    "fb.col.prob": "probability",
    "fb.no_mask": "Type {mask} in the text where a word should go to see the model fill it in.",
    "fb.no_head": "This model has no masked-LM head (a sentence encoder): it has nothing to fill a blank with.",
    "ln.intro": "Every decoder layer's residual stream read as if it were the last: through the model's own "
                "final norm and unembedding. Colour = probability of the token the model finally chose at that "
                "position; text = the token that layer ranks first.",
    "ln.assumes": "What the lens assumes: that an earlier layer's residual stream already lives in the space the "
                  "last layer's decoder reads. Nothing trained it to, so the lower rows are a rough reading that "
                  "gets sharper near the top; the top row is exactly the model's output.",
    "ln.row.embed": "embeddings",
    "ln.row.layer": "after layer {i}",
    "ln.grid_title": "Logit lens: P(final token) by layer and position",
    "ln.axis.pos": "decoder position → the token it predicts",
    "ln.axis.row": "residual stream",
    "ln.cb": "P(final token)",
    "ln.hover_top": "top token",
    "ln.output_line": "Right of the dashed line the predictions are the output ({n} {n:step|steps}).",
    "ln.window": "Positions {a} … {b} of {n}, around the marked step (move the step to move the window).",
    "ln.step": "Decoding step",
    "ln.step_help": "The step whose query is framed in the grid; the table lists each layer's top tokens there.",
    "ln.table_title": "Step {i}: {query} → {final}",
    "ln.col.row": "residual stream",
    "ln.col.top": "top tokens (probability)",
    "ln.col.final": "P({final})",
    "ln.known": "The final token leads from {row} on.",
    "ln.never": "No layer below the top ranks the final token first.",
    "ln.no_output": "The model produced no output for this text, so there is no decoding step to mark.",
    "ln.step_lens": "Logit lens of this step",
    "ln.step_lens_title": "Step {i}: what each layer predicts after {query}",
    "ln.step_lens_help": "The query of this step read after every layer (the model's own distribution, before "
                         "temperature or top-k/top-p).",

    # activation patching
    "nav.patching": "Activation patching",
    "pt.title": "Activation patching: where does the difference live?",
    "pt.intro": "Run text B with one component taken from text A, and see how much of A's output comes back. "
                "Score 1 = that component alone restores A's output; 0 = it changes nothing.",
    "pt.first": "Text A (the sidebar text)",
    "pt.other": "Text B (the same number of pieces)",
    "pt.empty": "Type a second text B.",
    "pt.over": "Patch",
    "pt.over.heads": "each head (hook_z)",
    "pt.over.blocks": "each attention block (hook_out)",
    "pt.over.resid": "residual stream (layer × position)",
    "pt.over_help": "A head's output, a whole attention block's output, or the residual stream at one position "
                    "after one layer.",
    "pt.running": "Patching every component (one batched forward)…",
    "pt.align": "The two texts must cut into the same number of pieces to patch one into the other: A has {a}, "
                "B has {b}.",
    "pt.align_tip": "Try pairs such as 我喜欢你。 / 你喜欢我。 or 我是一名工程师。 / 我是一名科学家。",
    "pt.same": "A and B give A's output the same probability: there is no difference to restore.",
    "pt.output_a": "A's output (measured)",
    "pt.output_b": "B's own output",
    "pt.blank_what": "An encoder-only model generates nothing: patching measures the log p of A's top piece at A's "
                     "first blank, at that position in B's runs.",
    "pt.blank_none": "An encoder-only model generates nothing: patching measures its masked-LM prediction at a blank. "
                     "Type {mask} in text A where a word should go.",
    "pt.blank_no_head": "An encoder-only model generates nothing, and this one has no masked-LM head: there is no "
                        "prediction here for patching to restore.",
    "pt.output_a_blank": "A's best piece at the blank (measured)",
    "pt.output_b_blank": "B's best piece there",
    "pt.blank_logprob": "log p(A's piece at the blank | A) = {a:.3f}, log p(A's piece there | B) = {b:.3f}",
    "pt.col.logprob_blank": "log p(A's piece at the blank)",
    "pt.logprob": "log P(A's output | A) = {a:.3f}, log P(A's output | B) = {b:.3f}",
    "pt.heads_title": "{block}: score of patching each head from A into B",
    "pt.blocks_title": "Score of patching each attention block's output from A into B",
    "pt.resid_title": "Score of patching the {part} residual stream at one position from A into B",
    "pt.axis.pos": "position (A / B)",
    "pt.axis.block": "attention block",
    "pt.row.embed": "embeddings",
    "pt.row.layer": "after layer {i}",
    "pt.cb": "score",
    "pt.hover": "share of the difference restored",
    "pt.top": "Components that restore the most",
    "pt.col.score": "score",
    "pt.col.logprob": "log P(A's output)",
    "pt.col.hook": "hook",
    "pt.col.pos": "position",
    "pt.col.piece": "piece",

    # lessons
    "nav.lessons": "Lessons",
    "sh.title": "Lessons",
    "sh.intro": "Every lesson, with the tutorial chapter it follows. Open one to walk it here, step by step, or "
                "start a live class on it: students join from their phones and answer its questions.",
    "sh.chapter": "Follows: {chapter}",
    "sh.facts": "{steps} {steps:step|steps} · {questions} {questions:question|questions} · {langs} · model {model}",
    "sh.lang.en": "English",
    "sh.lang.zh": "中文",
    "sh.open": "Open the lesson",
    "sh.class": "Start a class with it",
    "sh.broken": "{name} cannot be opened: {error}",
    "ls.panel": "Lesson: {title}",
    "ls.step": "Step {i} of {n}",
    "ls.back": "Previous lesson step",
    "ls.next": "Next lesson step",
    "ls.facts": "Checking this step's claims against the model…",
    "ls.broken": "On this checkpoint the note's claim does not hold: {claim}",
    "ls.restore": "Back to the lesson step",
    "ls.elsewhere": "You are on another page than this step's; \"Back to the lesson step\" returns.",
    "ls.leave": "Leave the lesson",
    "ls.bad": "This lesson cannot be opened: {error}",
    "ls.no_model": "This step is written for the checkpoint {model}, which this server does not have (it has: "
                   "{have}), so its numbers are not shown. Put {model} in the checkpoints folder to follow it.",
    "ls.other_model": "This step is written for {model}; you are looking at {current}. \"Back to the lesson step\" "
                      "opens {model} again.",
    "ls.write": "Write a lesson",
    "ls.write_help": "Set up a page, write a note, and save it as the next step; then download the lesson file "
                     "and put it in lessons/ (open it with ?lesson=FILE-NAME).",
    "ls.title_en": "Lesson title (English)",
    "ls.title_zh": "Lesson title (中文)",
    "ls.default_title": "My lesson",
    "ls.note_en": "Note for this step (English)",
    "ls.note_zh": "Note for this step (中文)",
    "ls.save": "Save as lesson step",
    "ls.draft": "{n} {n:step|steps} in this lesson so far.",
    "ls.download": "Download the lesson file",
    "ls.clear": "Start a new lesson",
    "link.copy": "Copy link",
    "link.help": "This address opens this page as you see it now (model, text and settings), in any browser. "
                 "Copy it with the button at the right of the box.",
    "link.ignored": "This link's {what} cannot be shown here and was left at the default.",
    "link.expired": "This link's text has expired (texts behind links are kept {days:g} {days:day|days}): type it again.",
    "link.store_help": "This view's text is too long for an address. Making the link stores it on this server "
                       "for {days:g} {days:day|days}, under a random id, so anyone with the link sees it.",
    "link.make": "Make the link",
    "link.kept": "Its text is kept on this server for {days:g} {days:day|days} from when the link was made.",
    "link.err.rate": "Too many links from this browser: wait a minute.",
    "link.err.long": "This text is too long to store ({n:,} {n:character|characters}; at most {max:,}).",
    "link.err.full": "This text is larger than all the room this server keeps for texts.",
    "link.err.unavailable": "The server cannot store texts now: the link was not made. The page still works.",
    "ls.q_kind": "Question for this step",
    "ls.q_kind.none": "no question",
    "ls.q_kind.argmax_key": "which key gets the most weight (this head, this row)",
    "ls.q_kind.next_token": "which piece greedy decoding writes first",
    "ls.q_kind.knockout_changes": "whether knocking out this head changes the output",
    "ls.q_kind.head_role": "which simple role this head plays",
    "ls.q_prompt_en": "Question for the student (English)",
    "ls.q_prompt_zh": "Question for the student (中文)",
    "ls.q_help": "The model computes the options and the answer from this step's head, row and text; you write only the question.",
    "qz.title": "Predict, then reveal",
    "qz.pick": "Your answer",
    "qz.hint": "Choose an answer, then press “Reveal”.",
    "qz.reveal": "Reveal",
    "qz.again": "Try again",
    "qz.computing": "Working out this question's answer from the model…",
    "qz.bad": "This step's question cannot be computed: {error}",
    "qz.yes": "yes, it changes",
    "qz.no": "no, it stays the same",
    "qz.role.previous-token": "previous token",
    "qz.role.first-token sink": "first token",
    "qz.role.self": "itself",
    "qz.role.end-token sink": "last token",
    "qz.role.broad": "spread broadly",
    "qz.role.none": "no clear role",
    "qz.right": "Right: the model's answer is **{answer}**.",
    "qz.wrong": "You chose {choice}; the model's answer is **{answer}**.",
    "qz.row_title": "{block} · layer {layer} · head {head}: the row of {query}",
    "qz.key": "key",
    "qz.query": "query",
    "qz.click": "click to choose this key",
    "qz.weight": "attention weight",
    "qz.so_far": "Step {step} continues from: {pieces}",
    "qz.src.word": "the word (its token embedding)",
    "qz.src.position": "its position",
    "qz.src.context": "what earlier layers wrote there",
    "qz.src.bias": "the biases",
    "qz.why_context": "Row {query} puts {weight:.2f} of its weight on {piece}.",
    "qz.why_title": "The score of {piece}, split by what the key brings",
    "qz.why_x": "the key's part",
    "qz.why_y": "its share of the score",
    "qz.ev.why": "The score of {piece} is {score:.2f}; the largest share, {value:.2f}, comes from {source} (outlined).",
    "qz.resid_title": "The residual stream's mean length through the layers",
    "qz.resid_x": "0 = the input, i = after layer i",
    "qz.resid_y": "mean length (L2 norm)",
    "qz.ev.resid": "From {first:.1f} at the input to {last:.1f} after the last layer: ×{ratio:.2f} (grows: ×{threshold:.1f} or more).",
    "qz.blank": "The model reads all of it at once, the blank included: {pieces}",
    "qz.fill_title": "The masked-LM head's most likely pieces for the blank",
    "qz.ev.fill": "The model fills the blank with its most likely piece: {piece}, with probability {p:.2f} (outlined).",
    "qz.output": "The output with every head: {output}",
    "qz.ev.argmax": "Row {query} puts its largest weight, {weight:.2f}, on {piece} (red frame).",
    "qz.next_title": "Step {step}: the most likely pieces",
    "qz.prob": "probability",
    "qz.candidate": "candidate piece",
    "qz.ev.next": "Greedy decoding takes the most likely piece: {piece}, with probability {p:.2f} (outlined).",
    "qz.ko_title": "Greedy output with and without {block} · layer {layer} · head {head}",
    "qz.with": "with the head",
    "qz.without": "head knocked out",
    "qz.position": "output position",
    "qz.differs": "differs",
    "qz.ev.changed": "Knocked out, the output becomes: {output_off} (red cells differ).",
    "qz.ev.same": "Knocked out, the output stays: {output_off}",
    "qz.role_title": "{block} · layer {layer} · head {head}: the weight each role would take",
    "qz.role": "role",
    "qz.mean_weight": "mean weight per row",
    "qz.threshold": "a role needs at least",
    "qz.ev.role": "Role: {role} ({evidence}; entropy {entropy:.2f} of {max_entropy:.2f} possible).",
    # presenter mode (?present=1) and the class banner
    "warmup.loading": ":material/hourglass_top: Loading the model: the first visit to a new server takes a few seconds.",
    "pr.back_page": "Previous page",
    "pr.next_page": "Next page",
    "qr.code": "Class code",
    "qr.scan": "Scan the code with a phone, or open this address:",

    # a live class (viz_explorer/classroom/live_class.py)
    "nav.live_class": "Live class",
    "nav.sec.class": "Class",
    "lc.title": "Live class",
    "lc.intro": "A teacher starts a class on a lesson and gets a code and a join link; students join with the code, "
                "with no account (a nickname is optional), and answer each step's question. The teacher's chart "
                "updates by itself.",
    "lc.check_in": "**How well do you follow this step?**",
    "lc.opt.got_it": "Got it",
    "lc.opt.unsure": "Not sure",
    "lc.opt.lost": "Lost",
    "lc.start_title": "Teacher: start a class",
    "lc.no_lessons": "There is no lesson in lessons/ to start a class on.",
    "lc.lesson": "Lesson",
    "lc.start": "Start a class",
    "lc.join_title": "Student: join a class",
    "lc.code": "Class code",
    "lc.join": "Join",
    "lc.teacher_title": "Class {code} · {lesson}",
    "lc.join_link": "Students join with the code, or with this link:",
    "lc.loopback": "Phones cannot open this address (it is this computer's own): set {env} to the address students "
                   "reach, e.g. `{env}=http://192.168.1.20:8501`, and restart the app.",
    "lc.key_title": "Your teacher key (keep it to yourself)",
    "lc.key_help": "Only this browser can run the class, also after a reload. To run it from another browser or "
                   "device, open this page's address there and type the key. Never show it to the class.",
    "lc.key_show": "Show the key",
    "lc.key_hide": "Hide the key",
    "lc.key_needed": "Class {code}: to run it from this browser, type your teacher key (shown under \"Your teacher "
                     "key\" where you started the class). Students join with the join link instead.",
    "lc.key": "Teacher key",
    "lc.key_go": "Run the class",
    "lc.key_wrong": "That is not this class's teacher key.",
    "lc.back": "Previous step",
    "lc.next": "Next step",
    "lc.open_step": "Open step {i} of {n} in the lesson",
    "lc.answered": "Answered",
    "lc.answered_n": "{k} of {n}",
    "lc.step_metric": "Class step",
    "lc.step_n": "Step {i} of {n}",
    "lc.chart_title": "Answers at step {i}",
    "lc.updated": "Updated at {time}; refreshes every second.",
    "lc.roster": "Who joined ({n})",
    "lc.anonymous": "(no nickname)",
    "lc.student_title": "Class {code}",
    "lc.nick_title": "Your nickname (optional)",
    "lc.nick": "Nickname",
    "lc.nick_help": "Only your teacher sees it. Leave it empty to stay anonymous.",
    "lc.nick_save": "Save nickname",
    "lc.your_pick": "Your answer",
    "lc.send": "Send",
    "lc.pick_first": "Pick an answer first.",
    "lc.sent": "Your answer: {choice}. You can change it until the teacher moves on.",
    "lc.err.code": "A class code is {n} {n:letter|letters} and digits, e.g. {example}.",
    "lc.err.no_class": "There is no class {code}: check the code with your teacher.",
    "lc.err.teacher": "Only the class's teacher can do this (type the teacher key on the teacher's page).",
    "lc.err.browser": "This browser's id is malformed: open the class's join link again.",
    "lc.err.rate": "Too many answers from this browser: wait {seconds} {seconds:second|seconds}.",
    "lc.err.choice": "That answer is not one of this question's options.",
    "lc.err.join": "Join the class first (open its join link).",
    "lc.err.revealed": "The answer is shown: this question takes no more answers.",
    "lc.err.unavailable": "The class's database cannot be reached now: nothing was saved. Try again in a moment.",
    "lc.err.full": "The class's database is full (its disk has no room): nothing was saved. The teacher has been told.",
    "lc.failed.full": "{n} {n:write|writes} of this class could not be saved in the last {seconds} "
                      "{seconds:second|seconds}: the database's disk is full. Free space on the server (or empty old "
                      "texts: viz-transformer texts --purge); answers sent meanwhile must be sent again.",
    "lc.failed.unavailable": "{n} {n:write|writes} of this class could not be saved in the last {seconds} "
                             "{seconds:second|seconds}: the database could not be reached. Students see a message "
                             "and can send again.",
    "lc.reveal": "Reveal the answer",
    "lc.answer_is": "The answer: **{answer}**.",
    "lc.answer_right": "The answer: **{answer}**. You got it right.",
    "lc.answer_wrong": "The answer: **{answer}**. You answered {choice}.",
    "lc.present": "Present this class",
    "lc.err.closed": "Voting on this question is closed.",
    "lc.err.hidden": "The teacher has not shown these results yet.",
    "lc.err.round": "A question has a first vote and a second one after discussion; it cannot go back to the first.",
    "lc.err.seconds": "A countdown is 0 … {most} {most:second|seconds}.",
    "pi.mode": "How the class answers this question",
    "pi.mode.one": "One vote",
    "pi.mode.peer": "Vote, discuss, vote again",
    "pi.seconds": "Countdown (s)",
    "pi.seconds_help": "Seconds the vote stays open once you start it (0: until you close it). Every phone shows what is left.",
    "pi.start": "Start vote {n}",
    "pi.close": "Close the vote",
    "pi.again": "Vote again",
    "pi.show": "Show the results",
    "pi.state.revealed": "The answer is shown.",
    "pi.state.open": "Vote {n} is open.",
    "pi.state.left": "{sec} {sec:second|seconds} left.",
    "pi.state.closed": "Vote {n} is closed.",
    "pi.state.discuss": "Discuss your answer with a neighbour.",
    "pi.vote1": "Vote 1 (alone)",
    "pi.vote2": "Vote 2 (after discussion)",
    "pi.hidden": "The results are hidden until you show them (this page may be projected).",
    "pi.moved": "Of {n} {n:student|students} who voted twice, {right} moved to the right answer and {wrong} away from it.",
    "pi.class_results": "The class's answers",
    "pi.your_first": "Your first vote: {choice}.",
    "pi.students": "students",
    "pi.sent_closed": "Your answer: {choice}.",
    "ck.where": "Where to see it: {page}, {figure}.",
    "ck.broken": "The concept checks cannot be read: {error}",
    "ck.title": "Concept checks before and after the lesson",
    "ck.intro": "{n} {n:concept|concepts}, each asked twice in two forms: one before the lesson and the other after it. The class's gain is in the report below.",
    "ck.start.pre": "Start the check before",
    "ck.start.post": "Start the check after",
    "ck.on": "The class is on the check {half}: question {i} of {n}.",
    "ck.half.pre": "before the lesson",
    "ck.half.post": "after the lesson",
    "ck.prev": "Previous question",
    "ck.next": "Next question",
    "ck.back": "Back to the lesson",
    "ck.student_on": "Concept check",
    "ck.metric.pre": "Check before the lesson",
    "ck.metric.post": "Check after the lesson",
    "ck.metric.other": "The bank's questions",
    "ck.question_n": "Question {i} of {n}",
    "ck.no_banks": "No question bank in `{folder}`.",
    "ck.bank": "Question bank",
    "ck.intro_plain": "{n} {n:question|questions}, asked one at a time.",
    "ck.start.other": "Ask its other questions",
    "ck.half.other": "with the bank's other questions",
    "bw.title": "Write your own questions",
    "bw.help": "Write a question, add it, and download the file: put it in `{folder}` and it is offered beside the concept checks in every class. A concept asked before and after the lesson is a pair: form a, then form b.",
    "bw.concept": "Concept (a short name, e.g. `causal-mask`)",
    "bw.form": "Form",
    "bw.form.none": "a question alone",
    "bw.form.a": "a: before the lesson",
    "bw.form.b": "b: after the lesson",
    "bw.page": "The page that shows the answer",
    "bw.lang.en": "English",
    "bw.lang.zh": "Chinese",
    "bw.prompt": "Question",
    "bw.option": "Option {x}",
    "bw.figure": "Which figure on that page",
    "bw.answer": "The right option",
    "bw.add": "Add the question",
    "bw.count": "{n} {n:question|questions} in your draft.",
    "bw.bank_title": "Title ({lang})",
    "bw.download": "Download the questions (JSON)",
    "bw.clear": "Clear the draft",
    "ck.chart_title": "Answers to this concept check",
    "gn.title": "What the class learned (report)",
    "gn.none": "No answers yet.",
    "gn.class_gain": "**The class**: right before the lesson {pre}, after it {post}; normalised gain g = {g} (Hake: (after − before) / (1 − before)).",
    "gn.no_pairs": "No concept was checked both before and after the lesson yet, so there is no gain to compute.",
    "gn.class": "The class",
    "gn.concepts": "Concepts",
    "gn.questions": "Questions",
    "gn.concept": "Concept",
    "gn.question": "Question",
    "gn.pre": "Right before",
    "gn.post": "Right after",
    "gn.first": "Right in vote 1",
    "gn.second": "Right in vote 2",
    "gn.to_right": "Moved to right",
    "gn.to_wrong": "Moved away",
    "gn.student": "student {n}",
    "gn.csv": "Download the answers (CSV)",
    "gn.html": "Download the summary (HTML)",
    "gn.html_title": "Class {code}: what the class learned",
    "pc.open_figure": "Open this step's figure",
    # -- Attention vs attribution --
    "nav.attribution": "Attention vs attribution",
    "ab.title": "Attention vs attribution",
    "ab.intro": "Does attention explain the output? For one word the model wrote, six ways of scoring the input "
                "pieces side by side, each held against occlusion: how much the word's log-probability drops when "
                "one piece's embedding is zeroed.",
    "ab.encoder_only": "This model writes no output (it only fills in blanks), so there is no output word to explain. "
                       "Pick a translator or a language model.",
    "ab.no_output": "The model wrote nothing for this text, so there is no output word to explain.",
    "ab.m.attention": "attention",
    "ab.m.rollout": "rollout",
    "ab.m.value_norm": "value norm",
    "ab.m.grad_x_input": "grad × input",
    "ab.m.integrated_gradients": "integrated gradients",
    "ab.m.occlusion": "occlusion",
    "ab.step": "Output step",
    "ab.layer": "Layer (attention, value norm)",
    "ab.layer_help": "Attention and value norm read one layer's attention; the mean over layers by default.",
    "ab.layer_mean": "mean over layers",
    "ab.layer_one": "layer {layer}",
    "ab.writes": "Step {step} of {n}: the model writes **{piece}**.",
    "ab.run_gradients": "Compute occlusion and the gradients",
    "ab.run_rollout": "Compute the rollout",
    "ab.run_both": "Compute the rollout, occlusion and the gradients",
    "ab.rollout_long": "Rollout multiplies every layer's whole attention pattern: {cells} M attention weights for this "
                       "input on this model, more than {limit} M, so it waits for the button.",
    "ab.capped": "This input has {n} {n:piece|pieces}: occlusion and the gradient methods run on at most {limit}, so "
                 "they are not shown, and there is no τ.",
    "ab.limit": "Occlusion and the gradient methods run at once on inputs of up to {auto} {auto:piece|pieces}, on a "
                "button up to {limit}, not past {limit}; integrated gradients uses {steps} {steps:step|steps}.",
    "ab.long": "This input has {n} {n:piece|pieces}, more than {auto}: occlusion and the gradient methods (a forward per piece, "
               "and per integration step) wait for the button. Attention, rollout and value norm are shown now.",
    "ab.fig_title": "Step {step} (“{piece}”): each method over the input pieces",
    "ab.axis_pieces": "input piece",
    "ab.axis_method": "method",
    "ab.cb": "÷ row's largest |score|",
    "ab.hover": "score",
    "ab.marks": "Each row has its own scale (divided by its largest |score|). Black squares: in each row, the "
                "{k} {k:piece|pieces} whose rank differs most from their rank under occlusion.",
    "ab.best": "On this word, **{method}** agrees best with occlusion (τ = {tau}).",
    "ab.no_best": "No method's ranking can be compared with occlusion here (a constant row).",
    "ab.attention_misleads": "Attention misleads most on **{piece}** (piece {i}): attention ranks it {a}, occlusion "
                             "{o} (attention's τ = {tau}).",
    "ab.col.method": "method",
    "ab.col.tau": "Kendall τ with occlusion",
    "ab.col.different": "pieces ranked most differently",
    "ab.col.steps": "output steps",
    "ab.col.median": "median τ",
    "ab.col.mean": "mean τ",
    "ab.col.above_half": "steps with τ > 0.5",
    "ab.ig_error": "Integrated gradients' completeness error: {error} against f(x) − f(0) = {gap} ({share}, "
                   "{steps} {steps:step|steps}). A large share means the path bends sharply and the integral is rough.",
    "ab.defs": "Definitions",
    "ab.defs_md": "i = the row that predicts this step's word (teacher-forced on the model's own output); j = an input "
                  "piece (a translator's source pieces; a one-sequence model's prompt, its [begin] included).\n\n"
                  "- **attention**: the step's cross-attention row (one-sequence models: its self-attention row over "
                  "the prompt), mean over heads, one layer or the mean over layers.\n"
                  "- **rollout**: a translator's source attribution (last cross-attention × encoder rollout); a "
                  "one-sequence model's row of the decoder rollout (Abnar & Zuidema 2020).\n"
                  "- **value norm**: ‖Σ_h α_h,ij W_O,h v_h,j‖, the length of what piece j adds through the layer's "
                  "heads (Kobayashi et al. 2020).\n"
                  "- **grad × input**: ‖(∂ log p(word) / ∂e_j) ⊙ e_j‖₂ over the features of piece j's token embedding.\n"
                  "- **integrated gradients**: Captum's IntegratedGradients on the token embeddings, baseline all "
                  "zeros, L2 norm per piece.\n"
                  "- **occlusion**: log p(word) − log p(word with e_j = 0), the position kept: the reference.\n\n"
                  "**Kendall τ** compares two rankings of the pieces: 1 = the same order, 0 = unrelated, −1 = reversed. "
                  "Gradients are taken in float32.",
    "ab.often": "How often does attention agree?",
    "ab.source": "Sentences",
    "ab.source.builtin": "built-in held-out set",
    "ab.source.own": "your own",
    "ab.pick_source": "Pick a set of sentences: the built-in held-out set or your own.",
    "ab.builtin_help": "{n} {n:sentence|sentences} the model never trained on ({lang}): τ of each method with "
                       "occlusion at every output step of every sentence.",
    "ab.run_corpus": "Measure {n} {n:sentence|sentences}",
    "ab.not_yet": "Not measured yet: press the button (it runs every method at every output step; minutes).",
    "ab.often_title": "τ with occlusion over {steps} {steps:output step|output steps} of {n} {n:sentence|sentences} (mean per method, the dotted line "
                      "is 0)",
    "ab.often_best": "Over these sentences **{method}** agrees best with occlusion (median τ = {median}); attention's "
                     "median τ is {att}.",
    "qz.top_word": "The model writes **{word}** at output step {step}.",
    "qz.top_title": "Which piece matters for “{word}”: occlusion, and attention beside it",
    "qz.ev.top_same": "Zeroing **{piece}**'s embedding drops log p(“{word}”) the most ({drop:.2f}); attention also puts "
                      "its largest weight there ({weight:.2f}, mean over heads and layers).",
    "qz.ev.top_differs": "Zeroing **{piece}**'s embedding drops log p(“{word}”) the most ({drop:.2f}), but attention puts "
                         "its largest weight on **{looked}** ({weight:.2f}, mean over heads and layers): attention is "
                         "not the reason here.",
    "cj.progress": "{done} of {total} {total:text|texts} done",
    "cj.left": ", about {left} left",
    "cj.seconds": "{sec} s",
    "cj.minutes": "{mins} min {sec} s",
    "cj.cancel": "Cancel",
    "cj.cancelled": "The run was cancelled: nothing was kept. Run it again to start over.",
    "cj.failed": "The run over this corpus failed: {error}",
    "cj.on_ray": " (on the Ray cluster at {address})",
    "cj.fell_back": "Ray did not answer ({error}), so this server computed it.",
}

LANGS = {"en": "English", "zh": "简体中文"}
LANG_KEY = "lang"        # st.session_state[LANG_KEY]: the session's language

# Formulas shown with st.latex at the top of a page: the same in both languages (no words inside).
LATEX = {
    "ov.pre": r"h' = h + \mathrm{MHA}(\mathrm{LN}(h)),\qquad h_{\mathrm{out}} = h' + \mathrm{FFN}(\mathrm{LN}(h'))",
    "ov.post": r"h' = \mathrm{LN}(h + \mathrm{MHA}(h)),\qquad h_{\mathrm{out}} = \mathrm{LN}(h' + \mathrm{FFN}(h'))",
    "at": r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}} + M\right) V",
    "st": r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}} + M\right) V",
    "mk": r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}\qquad "
          r"M_{ij} = -\infty \;\Rightarrow\; \mathrm{softmax}(s + M)_{ij} = 0",
    "pe": r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d}}\right),\quad "
          r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d}}\right)",
    "dc": r"y_t = \arg\max_{w}\, p(w \mid y_{<t}, x),\qquad p = \mathrm{softmax}(z / T)",
    "ko": r"\Delta = \sum_t \log p_{\text{knocked out}}(y_t) - \sum_t \log p(y_t)",
    "ko.blank": r"\Delta = \log p_{\text{knocked out}}(y \mid \texttt{[MASK]}) - \log p(y \mid \texttt{[MASK]})",
    "po": r"x_i = E(w_i)\sqrt{d_{\mathrm{model}}} + PE_i",
    "cp": r"\Delta A = A^{(1)} - A^{(2)}",
    "ro": r"\hat A_l = \tfrac12\,\overline{A_l} + \tfrac12 I,\qquad R = \hat A_L \cdots \hat A_1",
    "hs": r"H = -\sum_j a_{ij} \log a_{ij}",
}


def current() -> str:
    """The session's language: the run's, or the language a format function was made in (in_language); "en"
    outside both."""
    import streamlit as st
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    forced = _MADE_IN.get()
    if forced is not None:
        return forced
    if get_script_run_ctx(suppress_warning=True) is None:
        return "en"
    lang = st.session_state.get(LANG_KEY, "en")
    return lang if lang in LANGS else "en"


# the language in_language's functions run in: a context variable, so no run's language leaks into another's
_MADE_IN: ContextVar[Optional[str]] = ContextVar("viz_language_made_in", default=None)


@contextmanager
def speaking(lang: str) -> Iterator[None]:
    """Within, current() is `lang` (in this thread or task only): a string made outside a run (a test) in a session's
    language."""
    token = _MADE_IN.set(lang if lang in LANGS else "en")
    try:
        yield
    finally:
        _MADE_IN.reset(token)


def in_language(fn: Callable) -> Callable:
    """A widget's format function that speaks the language of the run that made it, wherever it is called: Streamlit
    calls it in that run, AppTest also from its own thread when it sends a widget's value back."""
    lang = current()

    def call(*args, **kw):
        with speaking(lang):
            return fn(*args, **kw)
    return call


def has(key: str) -> bool:
    return key in EN


def table(lang: str) -> dict:
    return ZH if lang == "zh" else EN


# {n:piece|pieces}: the word that goes with the count n, the first for exactly 1, the second otherwise
# (English only: Chinese needs none). The count itself is printed by its own field: "{n} {n:piece|pieces}".
PLURAL = re.compile(r"\{(\w+):([^{}|:]*)\|([^{}|:]*)\}")


def plurals(s: str, **counts) -> str:
    """s with each {n:one|other} replaced by its word for counts["n"]; fields whose count is not given stay
    (the diagram fills the rest of its labels itself)."""
    return PLURAL.sub(lambda m: m[0] if m[1] not in counts else m[2] if counts[m[1]] == 1 else m[3], s)


def fill(s: str, **kw) -> str:
    """s formatted with kw, its plural words chosen by their counts."""
    return plurals(s, **kw).format(**kw)


def t(key: str, **kw) -> str:
    """The string for `key` in the session's language, formatted with kw. A key missing from ZH falls
    back to English; a key missing everywhere shows itself (easy to spot)."""
    s = table(current()).get(key, EN.get(key, key))
    return fill(s, **kw) if kw else s


from viz_explorer.kit.strings_zh import ZH  # noqa: E402  (the second table; it imports nothing from here)
