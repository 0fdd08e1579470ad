"""Tiny random Hugging Face models saved as local folders, for tests/test_hf_parity.py.

Each SHAPE builds one `transformers` model of a family (gpt2, llama, qwen2, qwen3, mistral) with random
weights large enough that attention is peaked (HF's own init sets biases to 0 and norms to 1, which would
hide a missing bias or norm), a tokenizer.json made with the `tokenizers` library (byte-level BPE, or a
SentencePiece-style BPE with byte fallback for mistral) wrapped in PreTrainedTokenizerFast, and the
model's generation_config.json. `hf_forward` runs the saved folder through transformers itself (eager
attention, float32): the reference our loader is compared against.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()

EN = ["I am an engineer.", "I am a student.", "I love you.", "The weather is nice today.",
      "What is your name?", "I like to drink tea.", "He is my friend.", "We are going to Beijing tomorrow.",
      "This is my book.", "She works at the school.", "Once upon a time there was a little dog.",
      "The cat sat on the mat and looked at the bird.", "<b>bold</b> and <i>italic</i> text."]
ZH = ["我是一名工程师。", "我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。",
      "他是我的朋友。", "我们明天去北京。", "这是我的书。", "她在学校工作。"]

# texts the tokenizer test encodes both ways: Chinese, emoji, markup, runs of spaces, tabs and newlines
TOKENIZER_TEXTS = ["Hello world", "I love you. 我爱你。", "我是一名工程师。", "emoji 🙂👍 ok", "<b>x</b>",
                   "  two  spaces  ", " leading space", "tab\there\nnew line", "İstanbul ÀÉÎ café",
                   "The cat sat on the mat.", "<s></s><|endoftext|>"]
# the text whose logits and patterns are compared (≤ 24 tokens with every tokenizer here)
LOGITS_TEXT = "The cat sat on the mat. 我爱你。"
PROMPT = "I love you."
NEW_TOKENS = 10
MAX_IDS = 24


# -- tokenizers ---------------------------------------------------------------------------------------
def byte_level_bpe(specials: list[str], vocab_size: int, bos: Optional[str]) -> Tokenizer:
    """GPT-2 / Llama 3 / Qwen style: byte-level pre-tokenizer (GPT-2's regex), BPE, byte-level decoder;
    bos: the token the post-processor puts in front of every text (Llama 3), None for none (GPT-2, Qwen)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((EN + ZH) * 3, trainer)
    if bos is not None:
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                           special_tokens=[(bos, bos_id)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def sentencepiece_bpe(specials: list[str], merges_vocab: int, bos: str) -> Tokenizer:
    """Llama 2 / Mistral style: ▁ for spaces (Prepend + Replace normalizer, no pre-tokenizer), BPE with
    byte fallback (<0x00>..<0xFF> right after the specials), BOS added by the post-processor."""
    tok = Tokenizer(models.BPE(unk_token=specials[0], byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=merges_vocab, special_tokens=specials, show_progress=False,
                                  limit_alphabet=40)
    tok.train_from_iterator((EN + ZH) * 3, trainer)
    spec = json.loads(tok.to_str())
    learned = sorted(((t, i) for t, i in spec["model"]["vocab"].items() if t not in specials), key=lambda x: x[1])
    vocab = {t: i for i, t in enumerate(specials)}
    vocab.update({f"<0x{b:02X}>": len(specials) + b for b in range(256)})
    for t, _ in learned:
        vocab.setdefault(t, len(vocab))
    spec["model"]["vocab"] = vocab
    for added in spec["added_tokens"]:
        added["id"] = vocab[added["content"]]
    spec["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, vocab[bos])])
    return tok


@dataclass
class TokenizerSpec:
    kind: str                    # byte | sentencepiece
    specials: list[str]
    bos: Optional[str]           # the token the tokenizer itself adds in front (None: adds nothing)
    bos_token: Optional[str]     # tokenizer_config's bos_token
    eos_token: str
    unk_token: Optional[str] = None
    size: int = 290


TOKENIZERS = {
    "gpt2": TokenizerSpec("byte", ["<|endoftext|>"], None, "<|endoftext|>", "<|endoftext|>"),
    "llama": TokenizerSpec("byte", ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], "<|begin_of_text|>",
                           "<|begin_of_text|>", "<|end_of_text|>"),
    "qwen": TokenizerSpec("byte", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], None, None, "<|endoftext|>",
                          size=280),
    "mistral": TokenizerSpec("sentencepiece", ["<unk>", "<s>", "</s>"], "<s>", "<s>", "</s>", "<unk>", size=64),
}


def unigram_pieces(tok: Tokenizer, n_special: int) -> list[tuple[str, float]]:
    """A trained Unigram tokenizer's (piece, score) list, its first n_special kept in place and the rest sorted by
    score then piece. The trainer orders pieces of equal score as a hash map iterates, which differs between
    processes; sorted, a sentence gets the same ids in every run, so thresholds set on one run hold in the next."""
    vocab = [tuple(p) for p in json.loads(tok.to_str())["model"]["vocab"]]
    return vocab[:n_special] + sorted(vocab[n_special:], key=lambda p: (-p[1], p[0]))


def make_tokenizer(name: str) -> tuple[PreTrainedTokenizerFast, TokenizerSpec]:
    spec = TOKENIZERS[name]
    if spec.kind == "byte":
        raw = byte_level_bpe(spec.specials, spec.size, spec.bos)
    else:
        raw = sentencepiece_bpe(spec.specials, spec.size, spec.bos)
    kw = {k: v for k, v in (("bos_token", spec.bos_token), ("eos_token", spec.eos_token),
                            ("unk_token", spec.unk_token)) if v is not None}
    return PreTrainedTokenizerFast(tokenizer_object=raw, **kw), spec


# -- models -------------------------------------------------------------------------------------------
@dataclass
class Shape:
    """One tiny model: its family, HF config keywords, and how it is built and saved."""
    id: str
    family: str                  # gpt2 | llama | qwen2 | qwen3 | mistral (model_type)
    config: dict
    tokenizer: str               # key of TOKENIZERS
    vocab_extra: int = 0         # model vocabulary larger than the tokenizer's (padded, as Qwen's are)
    eos_reachable: bool = False  # make greedy decoding of PROMPT emit eos within NEW_TOKENS
    legacy_config: bool = False  # config.json rewritten as transformers 4 wrote it (rope_theta, rope_scaling)
    shard: Optional[str] = None  # max_shard_size for save_pretrained (sharded checkpoint)
    logits_text: str = LOGITS_TEXT
    features: tuple = ()         # family features the perturbation test removes (see test_hf_parity.PERTURB)
    seed: int = 0
    extra: dict = field(default_factory=dict)


def _rope(kind: str, theta: float = 10000.0, **kw) -> dict:
    return {"rope_type": kind, "rope_theta": theta, **kw}


LLAMA = dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=3,
             num_key_value_heads=3, max_position_embeddings=64, rms_norm_eps=1e-6)

SHAPES = [
    # GPT-2: learned positions, LayerNorm with biases, Conv1D weights, gelu_new; adds no BOS
    Shape("gpt2-3heads-tied", "gpt2", dict(n_embd=48, n_head=3, n_layer=2, n_positions=64, n_inner=None),
          "gpt2", eos_reachable=True, features=("positions", "gelu_variant", "attention_scale", "biases")),
    Shape("gpt2-5heads-untied-gelu", "gpt2", dict(n_embd=40, n_head=5, n_layer=2, n_positions=48, n_inner=72,
                                                  activation_function="gelu", tie_word_embeddings=False,
                                                  layer_norm_epsilon=1e-4),
          "gpt2", vocab_extra=7, features=("positions", "untied")),
    # Llama: RMSNorm, SwiGLU, RoPE (scaling types), grouped-query attention; BOS from the post-processor
    Shape("llama-3heads-tied", "llama", dict(LLAMA, tie_word_embeddings=True), "llama", eos_reachable=True,
          features=("rope_off", "rope_theta", "attention_scale", "gated", "embed_scale")),
    Shape("llama-gqa1-linear", "llama", dict(LLAMA, hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                                             rope_parameters=_rope("linear", 500000.0, factor=2.0)),
          "llama", features=("rope_type", "rope_theta", "untied")),
    Shape("llama-gqa2-llama3-bias", "llama", dict(LLAMA, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                                  attention_bias=True, mlp_bias=True,
                                                  rope_parameters=_rope("llama3", factor=4.0, low_freq_factor=1.0,
                                                                        high_freq_factor=4.0,
                                                                        original_max_position_embeddings=16)),
          "llama", features=("rope_type", "kv_groups", "qkv_bias", "out_bias")),
    Shape("llama-gqa1-dynamic", "llama", dict(LLAMA, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                                              max_position_embeddings=12,
                                              rope_parameters=_rope("dynamic", factor=3.0)),
          "llama", features=("rope_type",)),
    Shape("llama-gqa2-yarn-legacy", "llama", dict(LLAMA, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                                  head_dim=32,
                                                  rope_parameters=_rope("yarn", factor=4.0,
                                                                        original_max_position_embeddings=16)),
          "llama", legacy_config=True, features=("rope_type", "kv_groups")),
    # Qwen2: biases on q, k, v (none on o); no BOS; padded vocabulary; sliding_window set but not used
    Shape("qwen2-3heads-gqa1-bias", "qwen2", dict(hidden_size=48, intermediate_size=80, num_hidden_layers=2,
                                                  num_attention_heads=3, num_key_value_heads=1,
                                                  max_position_embeddings=64, sliding_window=4,
                                                  use_sliding_window=False,
                                                  rope_parameters=_rope("default", 1000000.0)),
          "qwen", vocab_extra=13, eos_reachable=True, features=("qkv_bias", "rope_off", "untied")),
    Shape("qwen2-gqa2-tied-sharded", "qwen2", dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                                   num_attention_heads=4, num_key_value_heads=2,
                                                   max_position_embeddings=64, tie_word_embeddings=True),
          "qwen", shard="20KB", features=("qkv_bias", "kv_groups")),
    # Qwen3: RMSNorm over each head's q and k, an explicit head_dim ≠ hidden / heads (attention_bias optional)
    Shape("qwen3-headdim24-gqa2-tied", "qwen3", dict(hidden_size=48, intermediate_size=80, num_hidden_layers=2,
                                                     num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                                                     max_position_embeddings=64, tie_word_embeddings=True),
          "qwen", eos_reachable=True, features=("qk_norm", "rope_theta", "attention_scale")),
    Shape("qwen3-3heads-headdim16-gqa1-yarn-bias", "qwen3",
          dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=3,
               num_key_value_heads=1, head_dim=16, max_position_embeddings=64, attention_bias=True,
               rope_parameters=_rope("yarn", factor=2.0, original_max_position_embeddings=32, beta_fast=16.0,
                                     beta_slow=2.0)),
          "qwen", legacy_config=True, features=("qk_norm", "rope_type", "untied", "qkv_bias", "out_bias")),
    # Mistral: a sliding window smaller than the sequence; SentencePiece-style tokenizer with byte fallback
    Shape("mistral-window6-gqa1", "mistral", dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                                                  num_attention_heads=4, num_key_value_heads=1,
                                                  max_position_embeddings=64, sliding_window=6),
          "mistral", eos_reachable=True, features=("sliding_window", "rope_off", "untied")),
    Shape("mistral-window9-gqa2-headdim", "mistral", dict(hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                                          num_attention_heads=6, num_key_value_heads=2, head_dim=12,
                                                          max_position_embeddings=64, sliding_window=9),
          "mistral", shard="30KB", features=("sliding_window", "kv_groups")),
]
SHAPE_BY_ID = {s.id: s for s in SHAPES}


def hf_config(shape: Shape, tok: PreTrainedTokenizerFast, spec: TokenizerSpec):
    vocab = len(tok) + shape.vocab_extra
    bos = tok.convert_tokens_to_ids(spec.bos_token) if spec.bos_token else None
    eos = tok.convert_tokens_to_ids(spec.eos_token)
    kw = dict(shape.config, vocab_size=vocab, bos_token_id=bos, eos_token_id=eos)
    if shape.family == "gpt2":
        kw.update(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cls = transformers.AutoConfig.for_model(shape.family).__class__
    return cls(**kw)


def randomize(model: torch.nn.Module, seed: int, attn_gain: float = 2.5, out_gain: float = 1.0,
              head_gain: float = 3.0) -> None:
    """Every parameter random: norm weights uniform in [0.5, 1.5] (q/k norms in [1.5, 2.5]: they fix q and k's
    size, so they set how peaked attention is), biases and norm biases N(0, 0.5²), each weight matrix
    N(0, (gain / √fan_in)²) with a larger gain on q and k (peaked attention), and the token embedding and
    unembedding N(0, (head_gain / √d)²) (logits O(1–10)). Buffers (rotary inverse frequencies) are derived
    from the config and left alone."""
    g = torch.Generator().manual_seed(seed)

    def rand(p, std):
        return torch.randn(p.shape, generator=g) * std

    with torch.no_grad():
        seen = set()
        for name, p in model.named_parameters(remove_duplicate=True):
            if id(p) in seen:
                continue
            seen.add(id(p))
            leaf = name.rsplit(".", 1)[0].rsplit(".", 1)[-1]
            if p.ndim == 1 and leaf in ("q_norm", "k_norm"):
                p.copy_(1.5 + torch.rand(p.shape, generator=g))
            elif p.ndim == 1 and ("norm" in name or "ln" in leaf) and name.endswith("weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif p.ndim == 1:
                p.copy_(rand(p, 0.5))
            elif any(k in name for k in ("wte", "wpe", "embed_tokens", "lm_head")):
                p.copy_(rand(p, head_gain / math.sqrt(p.shape[1])))
            else:
                conv1d = type(model).__name__.startswith("GPT2")       # GPT-2's Conv1D: weight [in, out]
                fan_in = p.shape[0] if conv1d else p.shape[1]
                gain = attn_gain if any(k in name for k in ("q_proj", "k_proj", "c_attn")) else out_gain
                p.copy_(rand(p, gain / math.sqrt(fan_in)))


def _hf_model(cfg, seed: int):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    return model.eval()


def make_eos_reachable(model, ids: list[int], eos: int, steps: int) -> None:
    """Make greedy decoding of `ids` stop after a few tokens: the unembedding row of eos becomes α × the row
    of a token t that greedy decoding picks at step k ≥ 3 (so eos outscores t there), for the first (k, α)
    whose decoding then ends in eos after at least 4 tokens. Tied embeddings change eos's input row too,
    which the prompt does not contain."""
    x = torch.tensor([ids])

    def greedy(stop):
        return model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=steps,
                              eos_token_id=stop, pad_token_id=eos)[0, len(ids):].tolist()
    with torch.no_grad():
        out = greedy(None)
        W = model.get_output_embeddings().weight
        original = W[eos].clone()
        for k in range(3, len(out)):
            for alpha in (1.5, 1.2, 1.1, 1.03):
                W[eos] = W[out[k]] * alpha
                got = greedy(eos)
                if 4 <= len(got) < steps and got[-1] == eos:
                    return
                W[eos] = original
    raise AssertionError(f"found no way to make eos the greedy choice after {out}")


def legacy_config(folder: Path) -> None:
    """Rewrite config.json as transformers 4 saved it: rope_theta at the top, rope_scaling {"type": ...}."""
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    rope = cfg.pop("rope_parameters", None) or {}
    cfg["rope_theta"] = rope.pop("rope_theta", 10000.0)
    kind = rope.pop("rope_type", "default")
    cfg["rope_scaling"] = None if kind == "default" else {"type": kind, **rope}
    cfg["transformers_version"] = "4.46.0"
    path.write_text(json.dumps(cfg, indent=2))


def build(shape: Shape, folder: Path) -> Path:
    """Save shape's tiny random model, its tokenizer and its generation config in folder."""
    folder = Path(folder)
    tok, spec = make_tokenizer(shape.tokenizer)
    cfg = hf_config(shape, tok, spec)
    model = _hf_model(cfg, shape.seed)
    randomize(model, 1000 + shape.seed)
    if shape.eos_reachable and not __import__("os").environ.get("NOEOS"):
        make_eos_reachable(model, tok(PROMPT).input_ids, cfg.eos_token_id, NEW_TOKENS)
    kw = {"max_shard_size": shape.shard} if shape.shard else {}
    model.save_pretrained(folder, **kw)
    model.generation_config.save_pretrained(folder)
    tok.save_pretrained(folder)
    if shape.legacy_config:
        legacy_config(folder)
    return folder


# -- the reference --------------------------------------------------------------------------------------
def load_hf(folder):
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()


def hf_forward(model, ids: list[int]):
    """(logits [T, vocab], [attention pattern [heads, T, T] per layer]) from transformers."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    return out.logits[0], [a[0] for a in out.attentions]


def hf_greedy(model, ids: list[int], max_new_tokens: int) -> list[int]:
    """transformers' greedy continuation of ids (the new ids only; a final eos included), under the
    generation_config the folder holds."""
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=max_new_tokens)
    return out[0, len(ids):].tolist()


def peakedness(patterns: list[torch.Tensor], skip: int = 4) -> float:
    """The smallest, over layers, of the mean largest weight per row (rows ≥ skip: early rows have few keys)."""
    return min(float(p[:, skip:, :].max(-1).values.mean()) for p in patterns)


# -- Marian (encoder-decoder translators) -------------------------------------------------------------------
MARIAN_SRC = ["我是一名工程师。", "我是学生。", "我爱你。", "今天天气很好。", "他是我的朋友。", "我们明天去北京。"]
MARIAN_TGT = ["I am an engineer.", "I am a student.", "I love you.", "The weather is nice today.",
              "He is my friend.", "We are going to Beijing tomorrow."]


def _spm(folder: Path, name: str, texts: list[str], size: int) -> dict:
    """A SentencePiece model folder/name trained on texts (</s> 0, <unk> 1, <pad> 2) and its Marian vocab
    (piece -> id, the same ids here; Marian's vocab.json need not follow SentencePiece's ids)."""
    import sentencepiece as spm
    prefix = folder / f"_{name}"
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts * 30), model_prefix=str(prefix), vocab_size=size,
                                   hard_vocab_limit=False, eos_id=0, unk_id=1, pad_id=2, bos_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
    (folder / f"_{name}.model").rename(folder / name)
    (folder / f"_{name}.vocab").unlink()
    return {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}


@dataclass
class MarianShape:
    """One tiny random Marian model: sizes, seed, whether its vocabularies are separate, and how much the
    output layer favours </s> (so beams end at different steps and early_stopping matters)."""
    id: str
    d_model: int = 48
    heads: int = 3
    layers: tuple = (2, 2)
    seed: int = 0
    separate: bool = False
    eos_bias: float = 0.0
    generation: dict = field(default_factory=dict)     # generation_config.json's settings besides bad words


MARIAN_SHAPES = [
    MarianShape("marian-3heads", seed=1, eos_bias=0.5, generation=dict(num_beams=4, max_length=24)),
    MarianShape("marian-4heads-3layers", d_model=32, heads=4, layers=(3, 2), seed=2, eos_bias=3.0,
                generation=dict(num_beams=3, early_stopping=True, length_penalty=0.6, max_length=20)),
    MarianShape("marian-2heads", d_model=40, heads=2, layers=(1, 2), seed=3, eos_bias=2.0,
                generation=dict(num_beams=5, early_stopping="never", length_penalty=1.5, max_new_tokens=12)),
    MarianShape("marian-separate-vocabs", seed=4, separate=True, eos_bias=3.0,
                generation=dict(num_beams=4, max_length=24)),
]
MARIAN_BY_ID = {s.id: s for s in MARIAN_SHAPES}


@torch.no_grad()
def randomize_marian(model, g: torch.Generator) -> None:
    """Every parameter of a MarianMTModel random (HF's init: biases 0, norms 1, which hides a missing bias or
    norm): norm weights around 1, biases around 0 with spread 0.5, matrices scaled so attention is peaked.
    The sinusoidal position table is left as it is (it is not learned)."""
    for name, p in model.named_parameters():
        if "embed_positions" in name:
            continue
        if "layer_norm" in name and name.endswith("weight"):
            p.copy_(1 + 0.5 * torch.randn(p.shape, generator=g))
        elif p.dim() == 1:
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
        else:
            p.copy_(torch.randn(p.shape, generator=g) * 1.5 / p.shape[-1] ** 0.5)


def build_marian(shape: MarianShape, folder) -> Path:
    """Save a tiny random MarianMTModel, its MarianTokenizer files (source.spm, target.spm, vocab.json, and
    target_vocab.json when the vocabularies are separate) and generation_config.json (bad_words_ids [[pad]],
    forced_eos_token_id, decoding from the pad id, as opus-mt's) in folder."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    src = _spm(folder, "source.spm", MARIAN_SRC + MARIAN_TGT if not shape.separate else MARIAN_SRC, 80)
    if shape.separate:
        tgt = _spm(folder, "target.spm", MARIAN_TGT, 60)
        (folder / "target_vocab.json").write_text(json.dumps(tgt), encoding="utf-8")
    else:
        tgt = src
        (folder / "target.spm").write_bytes((folder / "source.spm").read_bytes())
    (folder / "vocab.json").write_text(json.dumps(src), encoding="utf-8")
    kw = dict(target_vocab_file=str(folder / "target_vocab.json"), separate_vocabs=True) if shape.separate else {}
    tok = MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"), **kw)
    tok.save_pretrained(folder)
    pad = src["<pad>"]
    assert tgt["<pad>"] == pad and src["</s>"] == tgt["</s>"] == 0
    enc_layers, dec_layers = shape.layers
    cfg = MarianConfig(vocab_size=len(src), decoder_vocab_size=len(tgt), share_encoder_decoder_embeddings=not shape.separate,
                       d_model=shape.d_model, encoder_layers=enc_layers, decoder_layers=dec_layers,
                       encoder_attention_heads=shape.heads, decoder_attention_heads=shape.heads,
                       encoder_ffn_dim=2 * shape.d_model, decoder_ffn_dim=2 * shape.d_model, max_position_embeddings=64,
                       activation_function="swish", scale_embedding=True, pad_token_id=pad, eos_token_id=0,
                       decoder_start_token_id=pad, forced_eos_token_id=0)
    cfg._attn_implementation = "eager"
    torch.manual_seed(shape.seed)
    model = MarianMTModel(cfg).eval()
    g = torch.Generator().manual_seed(shape.seed)
    randomize_marian(model, g)
    with torch.no_grad():
        bias = torch.randn(model.final_logits_bias.shape, generator=g)
        bias[0, 0] += shape.eos_bias
        model.final_logits_bias.copy_(bias)
    model.generation_config.bad_words_ids = [[pad]]
    model.generation_config.num_beams = 1
    for k, v in shape.generation.items():
        setattr(model.generation_config, k, v)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def load_marian(folder):
    """(MarianMTModel in float32 with eager attention, MarianTokenizer) from a saved folder."""
    from transformers import MarianMTModel, MarianTokenizer
    model = MarianMTModel.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    return model, MarianTokenizer.from_pretrained(folder)
