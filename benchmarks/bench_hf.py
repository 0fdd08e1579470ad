"""The Hugging Face import's performance goals on a random model with Qwen2.5-0.5B's configuration (24 layers, 14 query heads,
2 KV heads, d_model 896, FFN 4864, vocabulary 151,936), measured in one run against Hugging Face's own code:

- load: `load_checkpoint(folder)` (goal ≤ 10 s), beside transformers' `from_pretrained` on the same folder;
- capture: every hook at 128 tokens (`run_with_cache`) against transformers' eager forward with
  output_attentions=True, alternating rounds, median of each (goal ratio ≤ 1.3);
- memory: this process's RSS with our model loaded (and without transformers' copy).

Needs transformers (requirements-dev.txt). Writes the folder once under --work (about 2 GB of float32).

    python -m benchmarks.bench_hf --rounds 5 --json benchmarks/results/bench_hf.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.procfs import rss_mib




def make_folder(work: Path) -> Path:
    """A random Qwen2.5-0.5B-shaped model and a small byte-level tokenizer, saved as a Hugging Face folder."""
    folder = work / "qwen2.5-0.5b-random"
    if (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file():
        return folder
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                      num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                      rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True,
                      bos_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(folder, safe_serialization=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.train_from_iterator(["Once upon a time there was a little dog who liked to run in the park."] * 50,
                            trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(folder)
    return folder


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/bench_hf")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    folder = make_folder(Path(args.work))
    from transformers import AutoModelForCausalLM

    from viz_transformer import load_checkpoint
    base, t = rss_mib(), time.perf_counter()
    hm = load_checkpoint(folder)
    load_s, rss_ours = time.perf_counter() - t, rss_mib() - base
    t = time.perf_counter()
    ref = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    hf_load_s = time.perf_counter() - t
    ids = torch.randint(2, 400, (1, args.tokens))
    with torch.no_grad():
        gap = (ref(ids).logits - hm.model(ids)).abs().max().item()
    ours, theirs = [], []
    for _ in range(args.rounds):                      # alternating, so both see the same machine load
        with torch.no_grad():
            ours.append(timed(lambda: hm.model.run_with_cache(ids)))
            theirs.append(timed(lambda: ref(ids, output_attentions=True)))
    res = {"load_s": round(load_s, 2), "hf_load_s": round(hf_load_s, 2), "rss_mb_ours": round(rss_ours),
           "capture_s": round(statistics.median(ours), 3), "hf_eager_attentions_s": round(statistics.median(theirs), 3),
           "ratio": round(statistics.median(ours) / statistics.median(theirs), 2), "tokens": args.tokens,
           "max_logit_gap": gap, "threads": args.threads, "rounds": args.rounds}
    print(json.dumps(res, indent=1))
    print(f"load {load_s:.1f} s (goal ≤ 10; transformers {hf_load_s:.1f} s); every hook at {args.tokens} tokens "
          f"{res['capture_s']} s vs transformers eager + attentions {res['hf_eager_attentions_s']} s: "
          f"{res['ratio']}× (goal ≤ 1.3); our model adds {rss_ours:.0f} MB RSS")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
