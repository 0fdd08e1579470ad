"""One task, three architectures: one-sequence translators ([begin] src [sep] tgt [end]) against
independent references, the architecture comparison's maths, and attention snapshots over training."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import viz_transformer.training.train as T
from viz_transformer.analysis import architectures as A
from viz_transformer import load_checkpoint
from viz_transformer.run.decoding import greedy_ids
from viz_transformer.run.logit_rules import never_generated
from viz_transformer.core.encoding import encode_input
from viz_transformer.core.model import Transformer
from viz_transformer.training.snapshots import SNAPSHOT_PAIRS, load_training_snapshots, planned_steps
from viz_transformer.training.step import target_only

from test_core_train import TINY, pairs_tsv  # noqa: F401  (the tiny corpus fixture)

ZH = ["我是一名工程师。", "我爱你。", "他是我的朋友。", "你叫什么名字？", "我是学生。", "今天天气很好。"]


@pytest.fixture(scope="module", params=["tiny-zh-en-decoder", "tiny-zh-en-prefix"])
def seq_translator(request, ckpt_root):
    return load_checkpoint(ckpt_root / request.param)


def full_recompute_greedy(model, prompt: list[int], banned: list[int], eos: int, max_new: int) -> list[int]:
    """Greedy decoding with no KV cache: the whole sequence through the model at every step."""
    ids = list(prompt)
    prefix = len(prompt) if model.cfg.architecture == "prefix_lm" else None
    out = []
    for _ in range(max_new):
        logits = model(torch.tensor([ids]), prefix_len=prefix)[0, -1]
        logits[banned] = float("-inf")
        nxt = int(logits.argmax())
        if nxt == eos:
            break
        out.append(nxt)
        ids.append(nxt)
    return out


def test_prompt_is_begin_source_sep_and_keeps_the_first_pieces(seq_translator):
    tok, cfg = seq_translator.tokenizer, seq_translator.cfg
    assert cfg.sep_id == tok.sep_id >= 0 and cfg.is_translator and not cfg.is_encoder_decoder
    ids = tok.encode("我是一名工程师。")
    enc = encode_input(tok, cfg, "我是一名工程师。", reserve=4)
    assert enc.ids == [cfg.bos_id] + ids + [cfg.sep_id] and enc.n_cut == 0
    long = "我是一名工程师。" * 40
    all_ids = tok.encode(long)
    enc = encode_input(tok, cfg, long, reserve=10)
    room = cfg.max_len - 2 - 10
    assert enc.ids == [cfg.bos_id] + all_ids[:room] + [cfg.sep_id]            # a translator keeps the start
    assert enc.n_cut == len(all_ids) - room and enc.cut_at == "end"
    assert "[sep]" not in tok.decode(enc.ids)                                 # a control piece: never shown as text
    assert tok.encode("[sep]") != [cfg.sep_id]                                 # typed text never becomes [sep]


def test_batched_greedy_equals_a_full_recompute_loop(seq_translator):
    model, tok, cfg = seq_translator.model, seq_translator.tokenizer, seq_translator.cfg
    got = greedy_ids(model, tok, ZH, max_new_tokens=12, batch_size=3)
    for text, ids in zip(ZH, got):
        prompt = encode_input(tok, cfg, text, reserve=12).ids
        assert ids == full_recompute_greedy(model, prompt, never_generated(tok), cfg.eos_id, 12), text


def test_run_is_teacher_forced_on_its_output_after_the_prompt(seq_translator):
    hm = seq_translator
    run = hm.run("我爱你。", max_new_tokens=10)
    prompt = encode_input(hm.tokenizer, hm.cfg, "我爱你。", reserve=10).ids
    assert run.tgt_ids == prompt + run.output_ids and run.prompt_len == len(prompt) and run.src_ids is None
    assert run.output_ids == run.trace.generated_ids
    mask = run.cache["decoder.0.self_attn.hook_mask"][0, 0]
    T_ = len(run.tgt_ids)
    expect = torch.tril(torch.ones(T_, T_, dtype=torch.bool))
    if hm.cfg.architecture == "prefix_lm":
        assert run.prefix_len == len(prompt)
        expect[: len(prompt), : len(prompt)] = True                           # bidirectional inside the prompt
    assert torch.equal(mask, expect)


def test_source_attention_slices_the_right_rows_and_columns(seq_translator, tiny_translator):
    run = seq_translator.run("我是学生。", max_new_tokens=6)
    w, qp, kp = A.source_attention(run, seq_translator.cfg, 1)
    full = run.cache["decoder.1.self_attn.hook_pattern"][0].mean(0)
    p = run.prompt_len
    assert torch.allclose(w, full[p - 1:, 1:p - 1])
    assert qp[0] == f"[sep] → {run.predicted[p - 1]}" and kp == run.tgt_pieces[1:p - 1]
    run2 = tiny_translator.run("我是学生。", max_new_tokens=6)
    w2, qp2, kp2 = A.source_attention(run2, tiny_translator.cfg, 0, head=2)
    assert torch.equal(w2, run2.cache["decoder.0.cross_attn.hook_pattern"][0, 2])
    assert qp2 == [f"{a} → {b}" for a, b in zip(run2.tgt_pieces, run2.predicted)] and kp2 == run2.src_pieces
    seg = A.segments(run, seq_translator.cfg)
    assert (seg.source_start, seg.source_end, seg.target_start) == (1, p - 1, p)
    assert run.tgt_pieces[seg.source_end] == "[sep]" and A.segments(run2, tiny_translator.cfg) is None


def test_effective_rank_and_spectrum_against_their_definitions():
    n = 6
    assert A.effective_rank(A.spectrum(torch.eye(n)[None]))[0].item() == pytest.approx(n)
    rank_one = torch.full((1, n, n), 1.0 / n)                                  # every row the same
    assert A.effective_rank(A.spectrum(rank_one))[0].item() == pytest.approx(1.0, abs=1e-4)
    m = torch.softmax(torch.randn(3, 5, 7), -1)
    assert np.allclose(A.spectrum(m).numpy(), np.linalg.svd(m.double().numpy(), compute_uv=False), atol=1e-6)
    s = A.spectrum(m)
    p = s / s.sum(-1, keepdim=True)
    assert torch.allclose(A.effective_rank(s), torch.exp(-(p * p.log()).sum(-1)))


def test_causal_patterns_are_full_rank_and_flagged(seq_translator, tiny_translator):
    for hm in (seq_translator, tiny_translator):
        run = hm.run("我是一名工程师。", max_new_tokens=6)
        table = A.rank_table(run, hm.cfg, hm.name)
        for _, row in table.iterrows():
            name = f"{row.block.split('.')[0]}.{row.layer}.{row.block.split('.')[1]}.hook_mask"
            mask = run.cache[name][0, 0]
            assert row.causal == bool(torch.equal(mask, torch.tril(mask)))
            if row.causal:                       # lower-triangular with a positive diagonal: det > 0
                pat = run.cache[name.replace("hook_mask", "hook_pattern")][0, row["head"]].double()
                assert torch.all(torch.diagonal(pat) > 0) and torch.linalg.matrix_rank(pat) == pat.shape[0]
                assert row.min_sv_ratio > 0
        assert set(table.block) == {b for b in A.available_blocks(hm.cfg) if b != "decoder.cross_attn"}


def test_target_only_ignores_every_prediction_before_sep():
    x = torch.tensor([[2, 10, 11, 4, 20, 21, 3], [2, 12, 4, 22, 3, 0, 0]])    # [begin] src [sep] tgt [end] [pad]
    y = target_only(x, torch.tensor([4, 3]), pad_id=0)
    assert y.tolist() == [[0, 0, 0, 20, 21, 3], [0, 0, 22, 3, 0, 0]]


def test_planned_steps_are_log_spaced_from_zero_to_the_end():
    steps = planned_steps(3152, 14)
    assert steps[0] == 0 and steps[1] == 1 and steps[-1] == 3152 and len(steps) >= 12
    ratios = np.diff(np.log(steps[4:]))                                        # equal steps on a log scale
    assert np.allclose(ratios, ratios.mean(), rtol=0.2)


@pytest.mark.train
@pytest.mark.parametrize("arch", ["decoder_only", "prefix_lm"])
def test_one_sequence_translator_trains_records_snapshots_and_they_replay(tmp_path, pairs_tsv, arch):  # noqa: F811
    args = ["--task", "translation", "--data", str(pairs_tsv), "--out", str(tmp_path / "out"), "--work",
            str(tmp_path / "work"), "--architecture", arch, "--n-encoder-layers", "0", "--max-len", "64",
            "--epochs", "2", "--batch-size", "8", "--n-test", "4", "--n-val", "4", "--eval-limit", "4",
            "--snapshot-bleu-n", "4", *TINY]
    assert T.main(args) == 0
    hm = load_checkpoint(tmp_path / "out")
    assert hm.cfg.architecture == arch and hm.cfg.sep_id == hm.tokenizer.sep_id >= 0
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    snaps = load_training_snapshots(tmp_path / "out")
    total = meta["val"]["step"] if meta["val"]["epoch"] == 2 else None
    assert snaps.steps[0] == 0 and snaps.steps == sorted(snaps.steps) and len(snaps.steps) >= 2
    assert snaps.shipped_step == meta["val"]["step"] and snaps.shipped_step in snaps.steps
    assert total is None or snaps.steps[-1] == total
    assert snaps.texts == [s for s, _ in SNAPSHOT_PAIRS] and snaps.targets == [t for _, t in SNAPSHOT_PAIRS]
    # the shipped step's frames are the shipped model's patterns (the weights are stored as float16)
    runs = [hm.run(s, target=t) for s, t in SNAPSHOT_PAIRS]
    k = snaps.shipped_index
    for j, run in enumerate(runs):
        assert snaps.tgt_pieces[j] == run.tgt_pieces
        for name in snaps.names():
            assert torch.allclose(snaps.pattern(k, j, name), run.cache[name][0], atol=2e-2), name
    # step 0 is the random initialisation: the same seed, the same config, no update
    torch.manual_seed(meta["train_config"]["seed"])
    fresh = Transformer(hm.cfg).eval()
    from viz_transformer.run.capture import HookedModel
    run0 = HookedModel(fresh, hm.tokenizer).run(SNAPSHOT_PAIRS[0][0], target=SNAPSHOT_PAIRS[0][1])
    for name in snaps.names():
        assert torch.allclose(snaps.pattern(0, 0, name), run0.cache[name][0], atol=2e-3), name
    assert snaps.stack(0, 0, "decoder.self_attn").shape[0] == hm.cfg.n_decoder_layers
    assert len(snaps.translations[0]) == len(SNAPSHOT_PAIRS)


@pytest.mark.train
def test_evaluate_scores_several_translators_on_the_same_unseen_pairs(tmp_path, pairs_tsv, capsys):  # noqa: F811
    from viz_transformer.training import data as D
    from viz_transformer.cli import main
    from viz_transformer.training.evaluation import common_heldout
    for arch, n_enc in (("encoder_decoder", "1"), ("decoder_only", "0")):
        assert T.main(["--task", "translation", "--data", str(pairs_tsv), "--out", str(tmp_path / arch), "--work",
                       str(tmp_path / f"w-{arch}"), "--architecture", arch, "--n-encoder-layers", n_enc,
                       "--max-len", "64", "--epochs", "1", "--batch-size", "8", "--n-test", "6", "--n-val", "4",
                       "--no-snapshots", *TINY]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(tmp_path / "encoder_decoder"), "--checkpoint",
                 str(tmp_path / "decoder_only")]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [r["architecture"] for r in lines] == ["encoder_decoder", "decoder_only"]
    assert lines[0]["n"] == lines[1]["n"] > 0
    hms = [load_checkpoint(tmp_path / a) for a in ("encoder_decoder", "decoder_only")]
    items, _ = common_heldout(hms)
    train, _, test = D.split_by_source(D.read_pairs(pairs_tsv), 1234, 6, 4)
    assert items == [p for p in test if p[0] not in {s for s, _ in train}] and len(items) == lines[0]["n"]


# every shipped folder with a training playback
SHIPPED = sorted(p.parent.name for p in
                 (Path(__file__).resolve().parent.parent / "checkpoints").glob("*/training_snapshots.json"))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_snapshots_are_the_shipped_weights_and_the_seeded_initialisation(name):
    from viz_transformer.run.capture import HookedModel
    from viz_transformer.training.snapshots import INDEX, WEIGHTS
    path = Path(__file__).resolve().parent.parent / "checkpoints" / name
    hm, snaps = load_checkpoint(path), load_training_snapshots(path)
    assert (path / WEIGHTS).stat().st_size + (path / INDEX).stat().st_size <= 3_000_000
    assert snaps.steps[0] == 0 and len(snaps.steps) >= 12 and snaps.shipped_step == hm.meta["val"]["step"]
    k = snaps.shipped_index
    torch.manual_seed(hm.meta["train_config"]["seed"])
    fresh = HookedModel(Transformer(hm.cfg), hm.tokenizer)
    tuned = "init_from" in hm.meta          # a fine-tune starts from a trained model, not from the seeded init
    for j, text in enumerate(snaps.texts[:3]):        # a masked LM's texts hold a blank and have no reference
        ref = snaps.targets[j] or None
        assert (text, ref) == SNAPSHOT_PAIRS[j] or hm.cfg.is_encoder_only
        shipped, init = hm.run(text, target=ref), fresh.run(text, target=ref)
        assert snaps.tgt_pieces[j] == shipped.tgt_pieces and snaps.src_pieces[j] in (None, shipped.src_pieces)
        for name_ in snaps.names():
            assert torch.allclose(snaps.pattern(k, j, name_), shipped.cache[name_][0], atol=2e-2), name_
            at_init = torch.allclose(snaps.pattern(0, j, name_), init.cache[name_][0], atol=2e-3)
            assert at_init != tuned, name_


def test_rank_window_keeps_causal_structure_and_matches_a_direct_svd():
    n, m = 300, 40
    idx = A.rank_window(n, m)
    assert len(idx) == m and idx[0] == 0 and idx[-1] == n - 1 and torch.all(idx[1:] > idx[:-1])
    assert torch.equal(A.rank_window(30, m), torch.arange(30))                 # short: every piece
    scores = torch.randn(2, n, n).masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
    pat = torch.softmax(scores, -1)
    sub = pat[:, idx][:, :, idx]
    assert torch.equal(sub, torch.tril(sub)) and torch.all(torch.diagonal(sub, dim1=1, dim2=2) > 0)
    ref = np.linalg.svd(pat.double().numpy()[:, idx.numpy()][:, :, idx.numpy()], compute_uv=False)
    assert np.allclose(A.spectrum(sub).numpy(), ref, atol=1e-6)
    assert ref[:, -1].min() > 0                                               # still full rank


def test_a_long_patterns_spectrum_is_its_windows_svd(seq_translator):
    """Past the window's size (here 5 pieces) each pattern's spectrum is the SVD of its evenly spaced rows and
    columns: a compact run's, whose rows are recomputed alone, as a full capture's."""
    from viz_transformer.run.derived_cache import compact_run
    run = seq_translator.run("我是一名工程师。", max_new_tokens=6)
    for kept in (run, compact_run(run)):
        for (block, layer), (s, n, _) in A.self_spectra(kept, seq_translator.cfg, most=5).items():
            pat = run.cache[A.hook_name(block, layer, "hook_pattern")][0].double().numpy()
            idx = A.rank_window(n, 5).numpy()
            assert n > 5 and s.shape[-1] == 5
            assert np.allclose(s.numpy(), np.linalg.svd(pat[:, idx][:, :, idx], compute_uv=False), atol=1e-6)


def test_rank_table_reads_the_same_spectra_it_is_given(seq_translator):
    run = seq_translator.run("我是一名工程师。", max_new_tokens=6)
    spectra = A.self_spectra(run, seq_translator.cfg)
    table = A.rank_table(run, seq_translator.cfg, "x")
    assert table.equals(A.spectra_table(spectra, "x"))
    for (block, layer), (s, n, _) in spectra.items():
        pat = run.cache[A.hook_name(block, layer, "hook_pattern")][0]
        assert n == pat.shape[-1] == s.shape[-1]                              # short: measured whole
        ref = np.linalg.svd(pat.double().numpy(), compute_uv=False)
        assert np.allclose(s.numpy(), ref, atol=1e-6)
