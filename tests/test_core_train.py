"""The training pipeline end to end on tiny corpora: the loss drops, the checkpoint loads, and
re-running the same command resumes where it stopped (giving the same weights as no stop)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import viz_transformer.training.train as T
from viz_transformer.training import data as D, step as S, tasks
from viz_transformer import load_checkpoint

SUBJ = [("我", "I", ""), ("你", "You", ""), ("他", "He", "s"), ("她", "She", "s"), ("我们", "We", "")]
VERB = [("喜欢", "like"), ("有", "have"), ("要", "want")]
OBJ = [("茶", "tea"), ("书", "books"), ("猫", "cats"), ("苹果", "apples")]

TINY = ["--vocab-size", "300", "--d-model", "32", "--n-heads", "2", "--n-decoder-layers", "1", "--d-ff", "64",
        "--dropout", "0", "--warmup", "5", "--lr", "3e-3", "--label-smoothing", "0", "--threads", "1"]


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    """Train on the CPU even where a GPU exists: tiny models, and bit-for-bit reproducible resumes."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture(scope="module")
def pairs_tsv(tmp_path_factory):
    """60 zh-en pairs from a tiny grammar."""
    path = tmp_path_factory.mktemp("data") / "pairs.tsv"
    lines = ["zh\ten"] + [f"{s}{v}{o}。\t{se} {ve}{agr} {oe}." for s, se, agr in SUBJ for v, ve in VERB
                          for o, oe in OBJ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def stories_txt(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "stories.txt"
    animals, places = ["dog", "cat", "bird", "fish", "frog", "bear"], ["park", "garden", "house", "forest", "lake"]
    docs = [f"Once upon a time there was a little {a}. The {a} liked to play in the {p}. "
            f"One day the {a} found a red ball in the {p}, and it was very happy."
            for a in animals for p in places]
    path.write_text("\n<|endoftext|>\n".join(docs) + "\n", encoding="utf-8")
    return path


def translation_args(data, root, epochs=3):
    return ["--task", "translation", "--data", str(data), "--out", str(root / "out"), "--work", str(root / "work"),
            "--n-encoder-layers", "1", "--max-len", "48", "--epochs", str(epochs), "--batch-size", "8",
            "--n-test", "4", "--n-val", "4", "--eval-limit", "4", "--no-snapshots", *TINY]   # snapshots: test_architectures


def state(root) -> dict:
    return json.loads((root / "work" / "state.json").read_text())


def weights(root) -> dict:
    return {k: v for k, v in load_file(str(root / "work" / "state.safetensors")).items() if k.startswith("model.")}


@pytest.mark.train
def test_translation_trains_loads_and_resumes(tmp_path, pairs_tsv, monkeypatch, capsys):
    # 1. an uninterrupted run: the loss drops and the checkpoint loads
    a = tmp_path / "a"
    assert T.main(translation_args(pairs_tsv, a)) == 0
    info = state(a)
    assert [h["epoch"] for h in info["history"]] == [1, 2, 3]
    assert info["step"] == 3 * 7                                # 52 training pairs, batches of 8
    losses = [h["train_loss"] for h in info["history"]]
    assert losses[-1] < 0.8 * losses[0], losses
    hm = load_checkpoint(a / "out")
    assert (hm.cfg.architecture, hm.cfg.d_model, hm.cfg.n_heads, hm.cfg.n_encoder_layers) == \
        ("encoder_decoder", 32, 2, 1)
    assert hm.meta["val"] == info["best"] and "test" in hm.meta and len(hm.meta["demo"]) == len(T.DEMO_ZH)
    logits, cache = hm.run_with_cache("我喜欢茶。", target="I like tea.")
    assert torch.isfinite(logits).all() and "decoder.0.cross_attn.hook_pattern" in cache

    # 2. the same command, stopped after epoch 1 (the second evaluation fails) ...
    b = tmp_path / "b"
    real_score, calls = tasks.score_translation, []

    def failing_score(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("interrupted")
        return real_score(*args, **kw)
    monkeypatch.setattr(tasks, "score_translation", failing_score)
    with pytest.raises(RuntimeError, match="interrupted"):
        T.main(translation_args(pairs_tsv, b))
    assert state(b)["epoch"] == 1
    monkeypatch.setattr(tasks, "score_translation", real_score)

    # ... then re-run as is: it resumes after epoch 1 and ends where the uninterrupted run did
    capsys.readouterr()
    assert T.main(translation_args(pairs_tsv, b)) == 0
    err = capsys.readouterr().err
    assert "resuming" in err and "after epoch 1" in err
    assert "epoch 1/3" not in err and "epoch 2/3" in err
    info_b = state(b)
    assert [h["epoch"] for h in info_b["history"]] == [1, 2, 3] and info_b["step"] == info["step"]
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], atol=1e-6, rtol=1e-5, msg=k)

    # 3. once finished, the same command trains nothing more
    assert T.main(translation_args(pairs_tsv, b)) == 0
    err = capsys.readouterr().err
    assert "after epoch 3" in err and "epoch 3/3" not in err
    assert state(b)["history"] == info_b["history"]


# translation_args(epochs=2) stopped in epoch 2's evaluation, by c7ecf5c's code: work/ and out/ (its tokenizer in work/)
OLD_RUN = Path(__file__).parent / "fixtures" / "train_state_c7ecf5c"


@pytest.mark.train
def test_a_state_written_before_train_was_split_by_task_resumes(tmp_path, pairs_tsv, capsys):
    """A work folder that train.py wrote before train() was split by task (runs started
    then resume from such folders) continues where it stopped, in the same format, and ends where an uninterrupted run ends."""
    shutil.copytree(OLD_RUN, tmp_path / "old")
    shutil.copy(OLD_RUN / "work" / "tokenizer.model", tmp_path / "old" / "out")    # kept once in the fixture
    old = state(tmp_path / "old")
    capsys.readouterr()
    assert T.main(translation_args(pairs_tsv, tmp_path / "old", epochs=2)) == 0
    err = capsys.readouterr().err
    assert "after epoch 1 (step 7)" in err and "epoch 1/2" not in err and "epoch 2/2" in err
    info = state(tmp_path / "old")
    assert info.keys() == old.keys()                                   # the same fields in state.json ...
    assert info["history"][0] == old["history"][0] and info["init_grad_norms"] == old["init_grad_norms"]
    assert [h["epoch"] for h in info["history"]] == [1, 2] and info["step"] == 14
    assert T.main(translation_args(pairs_tsv, tmp_path / "new", epochs=2)) == 0
    names = [load_file(str(folder / "state.safetensors")).keys()
             for folder in (OLD_RUN / "work", tmp_path / "old" / "work", tmp_path / "new" / "work")]
    assert names[0] == names[1] == names[2]                        # ... and the same tensors
    assert info["history"][1]["train_loss"] == pytest.approx(state(tmp_path / "new")["history"][1]["train_loss"], abs=1e-3)
    resumed, straight = weights(tmp_path / "old"), weights(tmp_path / "new")
    for k in straight:        # bit for bit here; elsewhere the fixture's epoch 1 may differ by float rounding, which
        if not k.endswith("W_K.bias"):    # AdamW blows up in a key bias (its gradient is noise: softmax ignores it)
            torch.testing.assert_close(resumed[k], straight[k], atol=1e-4, rtol=1e-3, msg=k)


def lm_args(data, root, epochs=3):
    return ["--task", "lm", "--data", str(data), "--out", str(root / "out"), "--work", str(root / "work"),
            "--block-size", "16", "--batch-size", "4", "--max-len", "64", "--epochs", str(epochs),
            "--n-val", "3", "--eval-limit", "2", *TINY]


@pytest.mark.train
def test_language_model_trains_loads_and_resumes(tmp_path, stories_txt, capsys):
    assert T.main(lm_args(stories_txt, tmp_path, epochs=2)) == 0
    info = state(tmp_path)
    assert [h["epoch"] for h in info["history"]] == [1, 2]
    first_loss, first_ppl = info["history"][0]["train_loss"], info["history"][0]["perplexity"]
    hm = load_checkpoint(tmp_path / "out")
    assert hm.cfg.architecture == "decoder_only" and hm.cfg.n_encoder_layers == 0
    run = hm.run("Once upon a time", target="")
    assert run.tgt_pieces[0] == "[begin]" and "embed.hook_tok" in run.cache

    capsys.readouterr()
    assert T.main(lm_args(stories_txt, tmp_path, epochs=4)) == 0      # more epochs: continue, not restart
    err = capsys.readouterr().err
    assert "after epoch 2" in err and "epoch 1/4" not in err
    info = state(tmp_path)
    assert [h["epoch"] for h in info["history"]] == [1, 2, 3, 4]
    assert info["history"][-1]["train_loss"] < 0.8 * first_loss
    assert info["history"][-1]["perplexity"] < first_ppl
    assert load_checkpoint(tmp_path / "out").meta["val"] == info["best"]


@pytest.mark.train
def test_prefix_lm_trains_with_a_bidirectional_prefix(tmp_path, stories_txt):
    args = lm_args(stories_txt, tmp_path, epochs=3) + ["--architecture", "prefix_lm"]
    assert T.main(args) == 0
    info = state(tmp_path)
    assert info["history"][-1]["train_loss"] < info["history"][0]["train_loss"]
    hm = load_checkpoint(tmp_path / "out")
    assert hm.cfg.architecture == "prefix_lm"
    run = hm.run("Once upon a time there was", target="")
    mask = run.cache["decoder.0.self_attn.hook_mask"][0, 0]
    P = run.prefix_len
    assert P == len(run.tgt_pieces)
    assert mask[:P, :P].all()          # the prompt is the prefix: every prompt token sees every other


def test_split_by_source_keeps_every_source_in_one_split():
    pairs = [(f"源{i % 37}", f"ref {i}") for i in range(200)]          # 37 sources, most repeated
    train, val, test = D.split_by_source(pairs, seed=5, n_test=30, n_val=20)
    assert sorted(train + val + test) == sorted(pairs)
    sources = [{s for s, _ in part} for part in (train, val, test)]
    assert not (sources[0] & sources[1]) and not (sources[0] & sources[2]) and not (sources[1] & sources[2])
    for part, n in ((test, 30), (val, 20)):             # whole groups until the size is reached
        sizes = {s: sum(1 for p in pairs if p[0] == s) for s in {s for s, _ in part}}
        assert n <= len(part) < n + max(sizes.values())
    assert D.split_by_source(pairs, 5, 30, 20) == (train, val, test)
    assert D.split_by_source(pairs, 6, 30, 20) != (train, val, test)
    # the old pair split puts the same source on both sides
    tr, _, te = D.split(pairs, 5, 30, 20)
    assert {s for s, _ in tr} & {s for s, _ in te}


def test_unseen_sources_by_hand():
    train = [("a", "1"), ("b", "2")]
    kept, dropped = D.unseen_sources([("a", "x"), ("c", "y"), ("b", "z"), ("d", "w")], train)
    assert kept == [("c", "y"), ("d", "w")] and dropped == 2


@pytest.mark.train
def test_resume_with_another_architecture_or_vocabulary_refuses(tmp_path, pairs_tsv, capsys):
    root = tmp_path / "r"
    args = translation_args(pairs_tsv, root, epochs=1)
    assert T.main(args) == 0
    weights_before = weights(root)
    for change in (["--vocab-size", "280"], ["--d-model", "48"], ["--n-encoder-layers", "2"]):
        capsys.readouterr()
        assert T.main(args + change) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "different model" in err and str(root / "work") in err
        assert err.count("\n") == 0
    field = {"--d-model": "d_model"}
    capsys.readouterr()
    T.main(args + ["--d-model", "48"])
    assert field["--d-model"] in capsys.readouterr().err
    after = weights(root)
    assert after.keys() == weights_before.keys() and all(torch.equal(after[k], weights_before[k]) for k in after)


# -- the cheaper step (--fast): the same loss, fewer padded positions ------------------------------
def synthetic_items(n: int, one_sequence: bool, seed: int = 0) -> list[tuple]:
    """n training items with random lengths, shaped as train() encodes them."""
    g = torch.Generator().manual_seed(seed)
    items = []
    for _ in range(n):
        s, t = (int(v) for v in torch.randint(2, 30, (2,), generator=g))
        items.append(([5] * (s + t), s + 1) if one_sequence else ([5] * s, [2] + [6] * t))
    return items


@pytest.mark.parametrize("one_sequence", [False, True])
@pytest.mark.parametrize("fast", [True, False])
def test_batches_cover_every_item_once_and_depend_only_on_the_seed(one_sequence, fast):
    items = synthetic_items(1000, one_sequence)
    batches = tasks.translation_batches(items, 16, seed=7, fast=fast)
    assert sorted(i for b in batches for i in b) == list(range(len(items)))       # each item once an epoch
    assert [len(b) for b in batches].count(16) == len(batches) - 1                 # one partial batch
    assert tasks.translation_batches(items, 16, seed=7, fast=fast) == batches          # a resumed epoch: the same
    assert tasks.translation_batches(items, 16, seed=8, fast=fast) != batches          # next epoch: another order


def test_fast_batches_group_close_lengths():
    for one_sequence in (False, True):           # sequence length, or target length first
        items = synthetic_items(1000, one_sequence)
        length = [len(it[0] if one_sequence else it[1]) for it in items]
        batches = tasks.translation_batches(items, 16, seed=3, fast=True)
        for b in batches:                          # sorted over the whole epoch: no item outside a batch
            lo, hi = min(length[i] for i in b), max(length[i] for i in b)     # lies strictly between its
            assert not any(lo < length[i] < hi for i in set(range(len(items))) - set(b))   # shortest and longest
        assert sum(max(length[i] for i in b) - min(length[i] for i in b) for b in batches) < len(batches)
    # the whole epoch is one pool: fewer padded positions than the old pools of 50 batches
    items = synthetic_items(4000, False)
    padded = {fast: sum(len(b) * (max(len(items[i][0]) for i in b) + max(len(items[i][1]) for i in b))
                        for b in tasks.translation_batches(items, 16, seed=3, fast=fast)) for fast in (False, True)}
    assert padded[True] < 0.9 * padded[False], padded


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_fast_loss_and_gradients_equal_the_reference(arch):
    from core_util import tiny_model
    model = tiny_model(arch, dropout=0.1).train()
    items = [([7] * s, [2] + [8 + s] * t + [3]) for s, t in ((3, 5), (6, 2), (2, 9), (5, 5))]
    if arch != "encoder_decoder":
        items = [([2] + s + [4] + t[1:], len(s) + 1) for s, t in items]
    x, tgt, pl, y = S.translation_inputs(items, [0, 1, 2, 3], arch, pad_id=0)
    assert (y == 0).any() and (y != 0).any()                     # padding (and prompts) to skip
    grads, losses = {}, {}
    for fast in (False, True):
        model.zero_grad()
        torch.manual_seed(11)                                    # the same dropout masks on both paths
        losses[fast] = S.batch_loss(model, x, y, 0, 0.1, tgt, pl, fast=fast)
        losses[fast].backward()
        grads[fast] = {n: p.grad.clone() for n, p in model.named_parameters()}
    torch.testing.assert_close(losses[True], losses[False], atol=1e-5, rtol=1e-5)
    for n in grads[False]:
        torch.testing.assert_close(grads[True][n], grads[False][n], atol=1e-5, rtol=1e-5, msg=n)
    model.eval()
    with torch.no_grad():
        scored = y != 0
        torch.testing.assert_close(model(x, tgt, prefix_len=pl, logits_at=scored), model(x, tgt, prefix_len=pl)[scored])


def test_fused_adamw_steps_like_the_reference():
    from core_util import tiny_model
    models = {fast: tiny_model("encoder_decoder", seed=2).train() for fast in (False, True)}
    opts = {fast: S.make_optimizer(m, T.TrainConfig(fast=fast)) for fast, m in models.items()}
    assert opts[True].defaults["fused"] and not opts[False].defaults["fused"]
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        noise = [torch.randn(p.shape, generator=g) for p in models[False].parameters()]
        for fast, m in models.items():
            for p, n in zip(m.parameters(), noise):
                p.grad = n.clone()
            opts[fast].step()
    for (name, a), b in zip(models[False].named_parameters(), models[True].parameters()):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5, msg=name)


def test_no_fast_trains_as_before_and_a_run_can_switch(tmp_path, pairs_tsv, capsys):
    """--no-fast keeps the old step; a state saved by one kind of step resumes under the other."""
    assert T.main(translation_args(pairs_tsv, tmp_path, epochs=1)) == 0
    assert all(g["fused"] for g in state(tmp_path)["param_groups"])
    assert T.main(translation_args(pairs_tsv, tmp_path, epochs=2) + ["--no-fast"]) == 0
    assert "after epoch 1" in capsys.readouterr().err
    info = state(tmp_path)
    assert [h["epoch"] for h in info["history"]] == [1, 2] and info["step"] == 2 * 7
    assert not any(g["fused"] for g in info["param_groups"])     # the kernel is the running step's, not the saved one


@pytest.mark.train
def test_a_state_saved_before_the_newer_config_fields_resumes(tmp_path, pairs_tsv, capsys):
    """ModelConfig gained fields (RMSNorm, RoPE, ... for imported models); a training state saved without them is
    the same model (each field at its default) and resumes, while a real difference is still refused."""
    from viz_transformer.core.config import ModelConfig
    assert T.main(translation_args(pairs_tsv, tmp_path, epochs=1)) == 0
    path = tmp_path / "work" / "state.json"
    info = json.loads(path.read_text())
    new = {f for f in ModelConfig().to_dict() if f in ("norm_type", "ffn", "rope_theta", "stop_ids", "qk_norm")}
    info["model_config"] = {k: v for k, v in info["model_config"].items() if k not in new}
    path.write_text(json.dumps(info))
    assert T.main(translation_args(pairs_tsv, tmp_path, epochs=2)) == 0
    assert "after epoch 1" in capsys.readouterr().err
    info = json.loads(path.read_text())
    info["model_config"]["ffn"] = "gated"
    path.write_text(json.dumps(info))
    assert T.main(translation_args(pairs_tsv, tmp_path, epochs=3)) == 2
    assert "ffn differ" in capsys.readouterr().err


@pytest.mark.train
def test_a_fine_tune_starts_from_the_checkpoint_and_cuts_chinese_one_character_a_piece(tmp_path, pairs_tsv,
                                                                                     monkeypatch):
    from viz_transformer.core.recipes import recipe
    from viz_transformer.core.tokenizer import WORD_START, is_cjk
    base = tmp_path / "base"
    assert T.main(translation_args(pairs_tsv, base, epochs=1)) == 0
    tuned = tmp_path / "tuned"
    args = translation_args(pairs_tsv, tuned, epochs=1) + ["--init-from", str(base / "out"), "--cjk-chars",
                                                           "--d-model", "48"]      # the model flags are ignored
    start = {k: v.clone() for k, v in load_checkpoint(base / "out").model.state_dict().items()}
    real_step, first = T.train_step, {}

    def spy(model, *a, **kw):                  # the weights the first update starts from
        first.setdefault("sd", {k: v.detach().clone() for k, v in model.state_dict().items()})
        return real_step(model, *a, **kw)
    monkeypatch.setattr(T, "train_step", spy)
    assert T.main(args) == 0
    assert first["sd"].keys() == start.keys()
    assert all(torch.allclose(first["sd"][k], start[k]) for k in start)       # the checkpoint's weights, as saved
    hm, before = load_checkpoint(tuned / "out"), load_checkpoint(base / "out")
    assert hm.cfg.d_model == before.cfg.d_model == 32 and hm.cfg.vocab_size == before.cfg.vocab_size
    raw = [hm.tokenizer.sp.id_to_piece(i) for i in hm.tokenizer.encode("我们喜欢苹果。")]
    assert [p.lstrip(WORD_START) for p in raw if any(map(is_cjk, p))] == list("我们喜欢苹果。")
    assert hm.tokenizer.encode("I like tea.") == before.tokenizer.encode("I like tea.")
    record = hm.meta["init_from"]
    assert record["checkpoint"] == str(base / "out") and record["command"] == before.meta["command"]
    assert record["weights_sha256"] == before.meta["weights_sha256"]
    assert recipe(hm.meta) != recipe(before.meta) and recipe(hm.meta)[-1] is True


@pytest.mark.train
def test_a_fine_tune_of_a_one_sequence_translator_keeps_its_architecture(tmp_path, pairs_tsv):
    """The flags' default architecture is encoder-decoder; a fine-tune of a decoder-only checkpoint must encode its
    pairs as one sequence and train that model, not fail on the first batch."""
    base, tuned = tmp_path / "base", tmp_path / "tuned"
    assert T.main(translation_args(pairs_tsv, base, epochs=1) + ["--architecture", "decoder_only",
                                                                 "--n-decoder-layers", "1"]) == 0
    assert T.main(translation_args(pairs_tsv, tuned, epochs=1) + ["--init-from", str(base / "out"),
                                                                  "--cjk-chars"]) == 0
    hm = load_checkpoint(tuned / "out")
    assert hm.cfg.architecture == "decoder_only" and hm.cfg.to_dict() == load_checkpoint(base / "out").cfg.to_dict()
