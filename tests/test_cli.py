"""The command line, run as a user would: a subprocess of `python -m viz_transformer`."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT
from viz_transformer import decode, DecodeSettings

pytestmark = pytest.mark.slow          # subprocesses

ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "viz_transformer", *map(str, args)], input=stdin,
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)


def test_translate_reads_stdin_line_by_line_and_flushes_each(ckpt_root, tiny_translator):
    p = subprocess.Popen([sys.executable, "-m", "viz_transformer", "translate", "--checkpoint",
                          str(ckpt_root / "tiny-zh-en"), "--max-new-tokens", "8"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        outs = []
        for text in ["我是学生。", "我爱你。"]:
            p.stdin.write(text + "\n")
            p.stdin.flush()
            outs.append(p.stdout.readline().rstrip("\n"))   # would hang without a flush per line
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    finally:
        p.kill()
    # reference: the step-by-step decoder, a different code path from the batched one
    for text, out in zip(["我是学生。", "我爱你。"], outs):
        trace = decode(tiny_translator, text, DecodeSettings("greedy", max_new_tokens=8))
        assert out == tiny_translator.tokenizer.decode(trace.output_ids)


def test_translate_one_output_per_input_line(ckpt_root):
    r = cli("translate", "--checkpoint", ckpt_root / "tiny-zh-en", "--max-new-tokens", "4",
            stdin="我是学生。\n\n今天天气很好。\n")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 3


def test_generate_with_beam_and_sample_flags(ckpt_root):
    for flags in (["--beam", "--beam-width", "2"], ["--sample", "--seed", "3", "--top-p", "0.9"]):
        r = cli("generate", "--checkpoint", ckpt_root / "tiny-lm", "--text", "Once upon a time",
                "--max-new-tokens", "5", *flags)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("Once upon a time")


def expected_names(n_enc, n_dec, cross):
    names = ["src_embed.hook_tok", "src_embed.hook_pos", "tgt_embed.hook_tok", "tgt_embed.hook_pos"] if cross \
        else ["embed.hook_tok", "embed.hook_pos"]
    blocks = [f"encoder.{i}.self_attn" for i in range(n_enc)] + [f"decoder.{i}.self_attn" for i in range(n_dec)]
    blocks += [f"decoder.{i}.cross_attn" for i in range(n_dec)] if cross else []
    for b in blocks:
        names += [f"{b}.hook_{s}" for s in ("q", "k", "v", "scores", "mask", "pattern", "z", "out")]
    for part, n in (("encoder", n_enc), ("decoder", n_dec)):
        for i in range(n):
            names += [f"{part}.{i}.hook_resid_{s}" for s in ("pre", "mid", "post")]
            if part == "decoder" and cross:
                names.append(f"decoder.{i}.hook_resid_cross")
    return set(names)


def test_trace_npz_holds_every_capture_name_and_the_tokens(ckpt_root, tiny_translator, tmp_path):
    out = tmp_path / "run.npz"
    r = cli("trace", "--checkpoint", ckpt_root / "tiny-zh-en", "--text", "我是一名工程师。",
            "--target", "I am an engineer.", "--out", out)
    assert r.returncode == 0, r.stderr
    d = np.load(out)
    assert expected_names(2, 2, True) <= set(d.files)
    assert {"tokens.src", "tokens.tgt"} <= set(d.files)
    run = tiny_translator.run("我是一名工程师。", target="I am an engineer.")
    assert list(d["tokens.src"]) == run.src_pieces and list(d["tokens.tgt"]) == run.tgt_pieces
    # the dumped pattern is a real softmax over the unmasked keys
    pat = torch.from_numpy(d["decoder.1.cross_attn.hook_pattern"])
    assert torch.allclose(pat.sum(-1), torch.ones(pat.shape[:-1]), atol=1e-5)


def test_trace_json_for_a_decoder_only_model(ckpt_root, tmp_path):
    out = tmp_path / "run.json"
    r = cli("trace", "--checkpoint", ckpt_root / "tiny-lm", "--text", "Once upon a time", "--out", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert expected_names(0, 2, False) <= set(doc)
    assert doc["tokens.tgt"][0] == "[begin]"


def test_info_describes_the_checkpoint(ckpt_root):
    r = cli("info", "--checkpoint", ckpt_root / "tiny-lm", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    cfg = json.loads((ckpt_root / "tiny-lm" / "config.json").read_text())
    assert info["architecture"] == cfg["architecture"] == "decoder_only"
    assert info["positional"] == "learned" and info["heads"] == cfg["n_heads"]


@pytest.mark.parametrize("args, needle", [
    (["info", "--checkpoint", "no/such/folder"], "does not exist"),
    (["trace", "--checkpoint", "{ck}", "--text", "  ", "--out", "x.npz"], "empty"),
    (["trace", "--checkpoint", "{ck}", "--text", "hi", "--out", "x.txt"], ".npz or .json"),
    (["trace", "--checkpoint", "{ck}", "--text", "hi", "--out", "/no/such/dir/x.npz"], "/no/such/dir does not exist"),
    (["report", "--checkpoint", "{ck}", "--text", "我爱你。", "--out", "/no/such/dir/r.html"], "does not exist"),
    (["report", "--checkpoint", "{ck}", "--text", "", "--out", "r.html"], "empty"),
    (["stats", "--checkpoint", "{ck}", "--out", "/no/such/dir/s.csv"], "does not exist"),
    (["translate", "--checkpoint", "{ck}", "--text", ""], "the text is empty"),
    (["generate", "--checkpoint", "{lm}", "--text", "   "], "the text is empty"),
    (["info", "--checkpoint", "{unknown}"], "model_type 'no-such-family' is not supported"),
    (["translate", "--checkpoint", "{noweights}", "--text", "hi"], "model.safetensors"),
    (["check", "{ck}"], "not one"),
    (["check", "no/such/folder"], "does not exist"),
])
def test_user_mistakes_give_one_line_and_exit_2(ckpt_root, tmp_path, args, needle):
    unknown, noweights = tmp_path / "unknown", tmp_path / "noweights"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"model_type": "no-such-family", "vocab_size": 10}))
    noweights.mkdir()
    (noweights / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 10, "n_embd": 8,
                                                       "n_head": 2, "n_layer": 1, "n_positions": 16}))
    from tokenizers import Tokenizer, models
    Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>")).save(str(noweights / "tokenizer.json"))
    r = cli(*[a.format(ck=ckpt_root / "tiny-zh-en", lm=ckpt_root / "tiny-lm", unknown=unknown, noweights=noweights)
              for a in args])
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def _scored_checkpoint(tmp_path):
    """A tiny translator whose meta.json points at a small corpus: (folder, corpus, meta)."""
    from conftest import make_tiny_checkpoint
    zh = ["我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。", "他是我的朋友。", "这是我的书。", "她在学校工作。"]
    pairs = [(zh[i % len(zh)], f"reference {i}.") for i in range(40)]          # these sources 5 times each
    pairs += [(f"我有{n}本书。", f"I have {n} books.") for n in "一二三四五六七八九十"]   # and 10 once
    data = tmp_path / "pairs.tsv"
    data.write_text("zh\ten\n" + "".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    folder = make_tiny_checkpoint(tmp_path / "ckpt")
    meta = {"data": str(data), "split_seed": 3, "n_test": 10, "n_val": 5}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder, data, meta


def test_evaluate_with_beam_search_scores_what_the_traced_beam_search_says(tmp_path):
    import sacrebleu
    from viz_transformer.training import data as D
    from viz_transformer.run.capture import load_checkpoint
    folder, data, meta = _scored_checkpoint(tmp_path)
    greedy = json.loads(cli("evaluate", "--checkpoint", folder).stdout)
    r = cli("evaluate", "--checkpoint", folder, "--beam-width", "3", "--length-penalty", "0.6")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["beam_width"] == 3 and res["length_penalty"] == 0.6 and res["n"] == greedy["n"] > 0
    # reference: the step-by-step decoder's beam search, sentence by sentence, as the app runs it
    tr, _, te = D.split(D.read_pairs(data), 3, 10, 5)
    unseen = [p for p in te if p[0] not in {s for s, _ in tr}]
    hm = load_checkpoint(folder)
    n = min(64, hm.cfg.max_len // 4)
    beam = DecodeSettings("beam", max_new_tokens=n, beam_width=3, length_penalty=0.6)
    hyps = [hm.tokenizer.decode(decode(hm, s, beam).generated_ids) for s, _ in unseen]
    assert res["bleu"] == round(sacrebleu.corpus_bleu(hyps, [[t for _, t in unseen]]).score, 2)
    # width 1 is greedy decoding
    assert json.loads(cli("evaluate", "--checkpoint", folder, "--beam-width", "1").stdout) == greedy
    # --record keeps the score, and the command that printed it, in meta.json; the rest of meta stays
    assert cli("evaluate", "--checkpoint", folder, "--beam-width", "3", "--length-penalty", "0.6", "--record").returncode == 0
    kept = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert kept["test_beam3"]["bleu"] == res["bleu"] and kept["split_seed"] == meta["split_seed"]
    assert kept["test_beam3"]["command"].endswith("--beam-width 3 --length-penalty 0.6 --record")
    # ... and the translations it scored, one a line, in the pairs' order: the traced beam search's
    assert (folder / kept["test_beam3"]["translations"]).read_text(encoding="utf-8").splitlines() == hyps
    for args, needle in ((("--beam-width", "0"), "beam_width"), (("--limit", "3", "--record"), "--limit")):
        bad = cli("evaluate", "--checkpoint", folder, *args)
        assert bad.returncode == 2 and needle in bad.stderr and "Traceback" not in bad.stderr


def test_evaluate_scores_only_sources_never_seen_in_training(tmp_path):
    import sacrebleu
    from viz_transformer.training import data as D
    from viz_transformer.run.capture import load_checkpoint
    folder, data, meta = _scored_checkpoint(tmp_path)
    r = cli("evaluate", "--checkpoint", folder)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    # by hand: the old pair split, then only test pairs whose source is not in its training part
    tr, _, te = D.split(D.read_pairs(data), 3, 10, 5)
    unseen = [p for p in te if p[0] not in {s for s, _ in tr}]
    assert 0 < len(unseen) < len(te)           # the case exercises both kept and dropped pairs
    assert res["n"] == len(unseen) and res["n_dropped_seen"] == 10 - len(unseen) and res["unseen_sources_only"]
    hm = load_checkpoint(folder)
    if unseen:
        hyps = hm.translate([s for s, _ in unseen])
        assert res["bleu"] == round(sacrebleu.corpus_bleu(hyps, [[t for _, t in unseen]]).score, 2)
    # a checkpoint split by source drops nothing
    (folder / "meta.json").write_text(json.dumps(dict(meta, split="by_source")), encoding="utf-8")
    res = json.loads(cli("evaluate", "--checkpoint", folder).stdout)
    assert res["n_dropped_seen"] == 0 and res["split_by"] == "source" and res["n"] >= 10


# -- the confidence line, as the app shows it ----------------------------------------------------------
SHIPPED_DEFAULT = ROOT / "checkpoints" / "zh-en-postnorm"


def test_translate_prints_the_apps_confidence_line_and_names_a_character_read_as_bytes():
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import confidence as C
    text = "这家餐厅的饺子很好吃。"
    hm = load_checkpoint(SHIPPED_DEFAULT)
    tr = decode(hm, text)
    c = C.assess_ids(hm, text, tr.generated_ids, True)
    r = cli("translate", "--checkpoint", SHIPPED_DEFAULT, "--text", text)
    assert r.returncode == 0 and r.stdout.strip() == hm.tokenizer.decode(tr.generated_ids)
    lines = r.stderr.splitlines()
    assert C.line(c) in lines and f"· 1 character read as bytes" in C.line(c)
    warn = next(x for x in lines if x.startswith("warning:"))
    assert "饺 is not in this model's vocabulary: it reads it as 3 bytes" in warn
    j = cli("translate", "--checkpoint", SHIPPED_DEFAULT, "--text", text, "--json")
    got = json.loads(j.stdout)
    assert got["output"] == r.stdout.strip() and got["confidence"]["flagged"]
    assert got["confidence"]["bytes"] == [{"character": "饺", "pieces": len("饺".encode("utf-8"))}]
    assert got["confidence"]["mean_logprob"] == pytest.approx(c.mean_logprob, abs=1e-4)


def test_trace_prints_the_confidence_line_and_a_mismatched_command_names_the_architecture(tmp_path):
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis import confidence as C
    hm = load_checkpoint(SHIPPED_DEFAULT)
    r = cli("trace", "--checkpoint", SHIPPED_DEFAULT, "--text", "我是学生。", "--out", tmp_path / "run.json")
    assert r.returncode == 0 and C.line(C.assess(hm, hm.run("我是学生。"))) in r.stderr.splitlines()
    g = cli("generate", "--checkpoint", SHIPPED_DEFAULT, "--text", "我是学生。")
    assert "is an encoder-decoder model; `translate` fits it better" in g.stderr
    assert "a encoder" not in g.stderr and "encoder_decoder" not in g.stderr
