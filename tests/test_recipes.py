"""Which checkpoints the architecture comparison puts side by side (core.recipes): models trained on one recipe
(data, split, number of updates) before a better-trained model of one architecture, and a post-norm twin only of
a model with the same size and recipe. Checked on catalog entries built here, and on the shipped folders."""
from __future__ import annotations

from pathlib import Path

import pytest

from viz_transformer import list_checkpoints
from viz_transformer.core.catalog import CheckpointInfo
from viz_transformer.core.config import ModelConfig
from viz_transformer.core.recipes import comparison, norm_pair, recipe, same_recipe

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints"
ONE_SEQ = dict(n_encoder_layers=0, n_decoder_layers=7, sep_id=4)


def info(name, epochs, architecture="encoder_decoder", norm="pre", split="by_source", error=None, **cfg):
    cfg = {**(ONE_SEQ if architecture != "encoder_decoder" else {}), **cfg}
    meta = {"split": split, "train_config": {"data": "pairs.tsv", "epochs": epochs, "batch_size": 64, "seed": 1234}}
    return CheckpointInfo(name, Path(name), error, ModelConfig(architecture=architecture, norm=norm, **cfg), meta)


def test_the_equal_budget_trio_wins_over_a_longer_trained_single_model():
    infos = [info("a-long", 40), info("b-enc", 8), info("c-dec", 8, "decoder_only"), info("d-pre", 8, "prefix_lm")]
    got = comparison(infos)
    assert [i.name for i in got.values()] == ["b-enc", "c-dec", "d-pre"]
    assert list(got) == ["encoder_decoder", "decoder_only", "prefix_lm"]           # reading order
    assert same_recipe(got.values())
    # once the longer budget covers all three, it is the comparison
    infos += [info("e-dec", 40, "decoder_only"), info("f-pre", 40, "prefix_lm")]
    assert [i.name for i in comparison(infos).values()] == ["a-long", "e-dec", "f-pre"]


def test_ties_prefer_the_source_disjoint_split_then_the_longer_budget():
    pair_split = [info("a", 8, split=None), info("b", 8, "decoder_only", split=None)]
    short, long_ = ([info(f"s{e}", e), info(f"t{e}", e, "decoder_only")] for e in (8, 20))
    assert [i.name for i in comparison(pair_split + short).values()] == ["s8", "t8"]
    assert [i.name for i in comparison(short + long_).values()] == ["s20", "t20"]


def test_a_missing_architecture_is_filled_from_another_recipe_and_said():
    got = comparison([info("enc", 8), info("enc2", 8, norm="post"), info("dec", 20, "decoder_only")])
    assert [i.name for i in got.values()] == ["enc", "dec"]     # the pre-norm model, not its twin
    assert not same_recipe(got.values())
    assert not same_recipe([info("x", 8), CheckpointInfo("y", Path("y"), None, ModelConfig(), {})])


def test_broken_and_lm_folders_are_not_compared():
    lm = CheckpointInfo("lm", Path("lm"), None, ModelConfig(architecture="decoder_only", n_encoder_layers=0), {})
    assert comparison([info("bad", 8, error="no weights"), lm]) == {}


def test_a_twin_shares_size_and_recipe_and_the_preferred_pair_comes_first():
    pre8, post8, pre40, post40 = info("p8", 8), info("q8", 8, norm="post"), info("p40", 40), info("q40", 40, norm="post")
    wider = info("w40", 40, norm="post", d_model=128)
    assert norm_pair([pre8, post40, wider]) is None            # another budget, another size: no twin
    assert [i.name for i in norm_pair([post8, pre8, post40, pre40])] == ["p40", "q40"]     # by name: "p40" < "p8"
    assert [i.name for i in norm_pair([pre8, post8, pre40, post40], prefer="p40")] == ["p40", "q40"]
    assert [i.name for i in norm_pair([pre8, post8, pre40, post40], prefer="p8")] == ["p8", "q8"]
    assert recipe({}) is None and recipe({"train_config": "not a dict"}) is None


def test_the_shipped_comparison_shares_one_recipe():
    """zh-en, fine-tuned onto one-character pieces, has a recipe of its own (two stages); the trio trained on one
    recipe is the model it started from (kept as zh-en-v1) with the decoder-only and prefix-LM translators."""
    infos = list_checkpoints(SHIPPED)
    got = comparison(infos)
    assert set(got) == {"encoder_decoder", "decoder_only", "prefix_lm"}
    assert [got[a].name for a in ("encoder_decoder", "decoder_only", "prefix_lm")] == ["zh-en-v1", "zh-en-decoder", "zh-en-prefix"]
    assert same_recipe(got.values())
    assert {i.meta["split"] for i in got.values()} == {"by_source"}
    new = next(i for i in infos if i.name == "zh-en")
    assert new.meta["init_from"]["init_from"]["weights_sha256"] == got["encoder_decoder"].meta["weights_sha256"]
    assert not same_recipe([new, got["decoder_only"]]) and recipe(new.meta)[-1] is True      # cjk_chars


@pytest.mark.slow
@pytest.mark.usefixtures("training_data")      # evaluates on ../shared/data
def test_trained_to_a_plateau_on_one_budget_decoder_only_translates_about_as_well():
    """What the README says of the equal-budget runs: each plateaued on 40 × 394 updates, each translates the
    teaching sentence, and the decoder-only and prefix models are close to the encoder-decoder on test pairs
    decoded here."""
    from viz_transformer import load_checkpoint
    from viz_transformer.training.evaluation import evaluate_translators
    got = comparison(list_checkpoints(SHIPPED))
    trio = [got["encoder_decoder"], got["decoder_only"], got["prefix_lm"]]
    for info in trio:
        assert info.meta["curve"][-1]["step"] == 15_760 and info.meta["plateau"]["plateaued"], info.name
    hms = [load_checkpoint(i.path) for i in trio]
    for hm in hms:
        assert hm.run("我是一名工程师。").output in ("I am an engineer.", "I'm an engineer.")
    scores = [r["bleu"] for r in evaluate_translators(hms, limit=300)]
    assert min(scores) > 25 and max(scores) - min(scores) < 3, scores


@pytest.mark.slow
@pytest.mark.usefixtures("training_data")      # evaluates on ../shared/data
def test_the_shipped_post_norm_twin_is_zh_en_s_and_ends_behind_it():
    """The twin ships beside zh-en (same data, split, size, 40 epochs); what its run shows, as the README and the
    norm tab state it: post-norm's best validation BLEU is far below pre-norm's, and it stays behind on test pairs
    decoded here (a recompute, not the numbers in meta.json)."""
    from viz_transformer import load_checkpoint
    from viz_transformer.analysis.architectures import norm_twins
    from viz_transformer.training.evaluation import evaluate_translators
    pre, post = norm_pair(list_checkpoints(SHIPPED), prefer="zh-en-v1")
    assert (pre.name, post.name) == ("zh-en-v1", "zh-en-postnorm")
    assert pre.meta["curve"][-1]["step"] == post.meta["curve"][-1]["step"] == 15_760       # one budget: 40 × 394
    assert pre.meta["plateau"]["plateaued"] and post.meta["plateau"]["plateaued"]
    n = norm_twins(pre.meta, post.meta, [], [])
    assert n["diff"] < -5 and n["post_to"] > 3 * n["pre_to"]   # lower, and slower to reach the shared level
    g = pre.meta["init_grad_norms"]                               # at initialisation: post grows toward the output
    assert g["post"][-1] > 1.5 * g["pre"][-1] and g["pre"][3] > g["pre"][4] > g["pre"][5]
    hms = [load_checkpoint(SHIPPED / x) for x in ("zh-en-v1", "zh-en-postnorm")]
    got = evaluate_translators(hms, limit=300)
    assert got[0]["n"] == got[1]["n"] == 300 and got[1]["bleu"] < got[0]["bleu"] - 3


TRANSLATORS = ("zh-en", "zh-en-v1", "zh-en-decoder", "zh-en-prefix", "zh-en-postnorm")
SCORED_TOGETHER = (("zh-en", "zh-en-v1"), ("zh-en-v1", "zh-en-decoder", "zh-en-prefix", "zh-en-postnorm"))


@pytest.mark.slow
@pytest.mark.usefixtures("training_data")      # evaluates on ../shared/data
def test_every_translator_s_scores_come_from_one_command_and_the_beam_score_is_recomputed():
    """Each translator's meta.json keeps its greedy and beam-4 test scores from an `evaluate` run over several at once
    (the same 1,500 pairs): zh-en beside the model it replaced (zh-en-v1), which was scored earlier beside the other
    three under its old folder name. The goals the docs state hold: the one-character model is at least as good as
    the one it replaced, or within 0.5 BLEU; zh-en's beam score is decoded again here."""
    import json
    from viz_transformer import load_checkpoint
    from viz_transformer.training.evaluation import evaluate_translators
    metas = {n: json.loads((SHIPPED / n / "meta.json").read_text(encoding="utf-8")) for n in TRANSLATORS}
    for key in ("test", "test_beam4"):
        for group in SCORED_TOGETHER[:1]:
            commands = {metas[n][key]["command"] for n in group}
            assert len(commands) == 1, (key, group)                # one command printed them all
            command = commands.pop() + " "
            assert all(f"--checkpoint checkpoints/{n} " in command for n in group), command
        old = {metas[n][key]["command"] for n in SCORED_TOGETHER[1][1:]}
        assert len(old) == 1 and "--checkpoint checkpoints/zh-en " in old.pop() + " "    # zh-en-v1's old name
        assert {metas[n][key]["n"] for n in TRANSLATORS} == {1500}
    for n in TRANSLATORS:                                           # greedy "test" is what training itself scored
        assert metas[n]["test"]["bleu"] == metas[n]["confidence"]["test"]["all"]["bleu"]
        assert metas[n]["test_beam4"]["beam_width"] == 4 and metas[n]["test_beam4"]["length_penalty"] == 1.0
    beam = {n: metas[n]["test_beam4"]["bleu"] for n in TRANSLATORS}
    greedy = {n: metas[n]["test"]["bleu"] for n in TRANSLATORS}
    assert beam["zh-en-v1"] >= 31 and beam["zh-en-decoder"] >= 27 and beam["zh-en-prefix"] >= 27
    assert greedy["zh-en"] >= greedy["zh-en-v1"] - 0.5 and beam["zh-en"] >= beam["zh-en-v1"] - 0.5
    got = evaluate_translators([load_checkpoint(SHIPPED / "zh-en")], beam_width=4)[0]
    assert (got["bleu"], got["chrf"], got["n"]) == (beam["zh-en"], metas["zh-en"]["test_beam4"]["chrf"], 1500)
