"""The app with one-sequence translators: every page opens, the architecture comparison shows what
each model computed, the masks page shows the prefix mask really applied, and training playback
steps through the recorded snapshots."""
from __future__ import annotations

import gc

import re
import shutil

import numpy as np
import pytest

import viz_transformer.training.train as T
from app_util import PAGES, ZH, array, by_key, figure, figures, open_app, open_tab, texts
from viz_transformer import load_checkpoint
from viz_explorer.kit import widgets
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH as ZH_STRINGS
from viz_transformer.training.snapshots import load_training_snapshots

from test_core_train import TINY, pairs_tsv  # noqa: F401  (the tiny corpus fixture)

NEW_PAGES = ["viz_explorer/pages/experiment/compare_architectures.py", "viz_explorer/pages/train/attention_over_training.py"]


@pytest.mark.slow          # every page and tab, twice
@pytest.mark.parametrize("ckpt", ["tiny-zh-en-decoder", "tiny-zh-en-prefix"])
def test_every_page_opens_for_a_one_sequence_translator(env, ckpt):
    hm = load_checkpoint(env / ckpt)
    run = hm.run(ZH)
    lab = ["viz_explorer/pages/experiment/knockout.py", "viz_explorer/pages/experiment/positions_on_off.py", "viz_explorer/pages/experiment/compare_inputs.py", "viz_explorer/pages/experiment/rollout.py", "viz_explorer/pages/experiment/head_stats.py",
           "viz_explorer/pages/train/export.py", "viz_explorer/pages/step/logit_lens.py", "viz_explorer/pages/experiment/patching.py"]
    for page in PAGES + lab + NEW_PAGES:
        at = open_app(page, ckpt)
        assert not at.exception, (page, [e.value for e in at.exception])
        prefix = {"viz_explorer/pages/step/step_by_step.py": "st", "viz_explorer/pages/look/masks.py": "mk", "viz_explorer/pages/experiment/compare_architectures.py": "ar"}.get(page)
        for tab in widgets.TABS.get(prefix, ()):                # every tab of a tabbed page runs too
            open_tab(at, prefix, tab)
        if page == "viz_explorer/pages/look/overview.py":
            assert run.output in [c.value for c in at.text]                    # the translation, not a continuation
            assert "Translation" in texts(at) or any("Translation" in s.value for s in at.subheader)


def test_attention_page_marks_source_and_target_of_the_one_sequence(env):
    at = open_app("viz_explorer/pages/look/attention.py", "tiny-zh-en-decoder")
    run = load_checkpoint(env / "tiny-zh-en-decoder").run(ZH)
    fig = next(f for f in figures(at) if f["layout"].get("shapes"))
    lines = sorted(s["x0"] for s in fig["layout"]["shapes"] if s.get("x0") == s.get("x1"))
    assert lines == [0.5, run.prompt_len - 1.5]                                # after [begin], before [sep]
    assert run.tgt_pieces[run.prompt_len - 1] == "[sep]"
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["source", "[sep] + target"]


def test_masks_page_shows_the_prefix_mask_the_model_applied(env):
    at = open_app("viz_explorer/pages/look/masks.py", "tiny-zh-en-prefix")
    open_tab(at, "mk", "causal")
    run = load_checkpoint(env / "tiny-zh-en-prefix").run(ZH)
    expect = run.cache["decoder.0.self_attn.hook_mask"][0, 0].numpy().astype(float)
    fig = next(f for f in figures(at) if f["layout"]["title"]["text"] == "decoder.0.self_attn.hook_mask")
    assert np.array_equal(array(fig["data"][0]["z"]), expect)
    assert not np.all(expect == np.tril(np.ones_like(expect)))                 # bidirectional inside the prompt
    assert f"the {run.prefix_len} positions" in texts(at)


def test_architecture_page_shows_each_models_translation_and_source_reading(env):
    at = open_app("viz_explorer/pages/experiment/compare_architectures.py", "tiny-zh-en")
    outputs = [c.value for c in at.text]
    for name in ("tiny-zh-en", "tiny-zh-en-decoder", "tiny-zh-en-prefix"):
        run = load_checkpoint(env / name).run(ZH)
        assert (run.output or "(empty)") in outputs or run.output in outputs, name
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert sorted(t for t in titles if re.search(r"(cross|self)-attention, layer 1$", t)) == [   # the last layer
        "decoder-only: self-attention, layer 1", "enc-dec: cross-attention, layer 1", "prefix LM: self-attention, layer 1"]
    open_tab(at, "ar", "rank")
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert any("Effective rank" in t for t in titles) and any("Singular values" in t for t in titles)
    table = at.dataframe[0].value
    assert set(table["model"]) == {EN[f"ar.short.{a}"] for a in ("encoder_decoder", "decoder_only", "prefix_lm")}
    assert table.loc[table["block"] == EN["block.encoder.self_attn"], "causal"].eq(False).all()
    assert table.loc[table["model"] == EN["ar.short.decoder_only"], "causal"].all()


def test_architecture_page_says_same_budget_only_when_the_models_share_one_recipe(tmp_path, ckpt_root, monkeypatch):
    import json
    names = ("tiny-zh-en", "tiny-zh-en-decoder", "tiny-zh-en-prefix")
    for name in names:
        shutil.copytree(ckpt_root / name, tmp_path / name)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(tmp_path))

    def train_for(name, epochs):
        meta_path = tmp_path / name / "meta.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        meta.update(split="by_source", train_config={"data": "pairs.tsv", "seed": 1234, "epochs": epochs})
        meta_path.write_text(json.dumps(meta), encoding="utf-8")

    def shown(at):
        said = " ".join(m.value for m in at.markdown)
        return EN["ar.fair"] in said, any(w.value == EN["ar.unfair"] for w in at.warning)

    for name in names:
        train_for(name, 8)
    assert shown(open_app("viz_explorer/pages/experiment/compare_architectures.py", "tiny-zh-en")) == (True, False)
    from safetensors.torch import load_file, save_file
    folder = tmp_path / "tiny-zh-en"                            # the encoder-decoder, its norm after the residual:
    config = folder / "config.json"                             # the same sublayer norms, no final ones
    config.write_text(json.dumps(dict(json.loads(config.read_text(encoding="utf-8")), norm="post")), encoding="utf-8")
    weights = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith(("encoder_norm.", "decoder_norm."))},
              str(folder / "model.safetensors"))
    import hashlib
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    meta["weights_sha256"] = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    at = open_app("viz_explorer/pages/experiment/compare_architectures.py", "tiny-zh-en")
    said = " ".join(m.value for m in at.markdown)
    assert load_checkpoint(tmp_path / "tiny-zh-en").cfg.norm == "post" and not at.exception
    assert EN["ar.fair"] not in said and not any(w.value == EN["ar.unfair"] for w in at.warning)
    rest = r"tiny\-zh\-en\-decoder and tiny\-zh\-en\-prefix"
    assert EN["ar.fair_but"].format(items=EN["ar.diff.norm"].format(post=r"tiny\-zh\-en", pre=rest)) in said
    meta["train_config"]["schedule"] = "inverse_sqrt"           # and its learning rate moves as the original's
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    at = open_app("viz_explorer/pages/experiment/compare_architectures.py", "tiny-zh-en")
    said = " ".join(m.value for m in at.markdown)
    assert not at.exception and EN["ar.fair_but"].format(items=EN["ar.diff.sep"].join(
        [EN["ar.diff.norm"].format(post=r"tiny\-zh\-en", pre=rest),
         EN["ar.diff.schedule"].format(inverse_sqrt=r"tiny\-zh\-en", cosine=rest)])) in said
    train_for("tiny-zh-en-prefix", 4)          # the comparison still takes all three, but one had less training
    assert shown(open_app("viz_explorer/pages/experiment/compare_architectures.py", "tiny-zh-en")) == (False, True)


def test_architecture_page_keeps_no_compared_models_run(env):
    """The comparison keeps its small views (arch_view); the memo shared by every session keeps the sidebar
    model's run alone, not a 512-piece run of each compared model that no page reads again, and only the
    sidebar's model stays loaded."""
    from viz_explorer.server import cached
    from viz_explorer.startup import load
    load.start()
    load.wait()                                  # the start-up's own run is in the memo before it is emptied
    cached.memo().clear()                        # the compared models' views too: every result is in the memo
    cached.load_model.clear()
    gc.collect()                                 # models held by nothing else leave cached.loaded_models
    before = cached.loaded_models()
    at = open_app("viz_explorer/pages/experiment/compare_architectures.py", "tiny-zh-en")
    assert not at.exception
    outputs = [c.value for c in at.text]
    for name in ("tiny-zh-en-decoder", "tiny-zh-en-prefix"):                # shown, computed from a run not kept
        assert load_checkpoint(env / name).run(ZH).output in outputs, name
        n = sum(p.numel() for p in load_checkpoint(env / name).model.parameters())
        assert any(c.value == EN["ar.checkpoint"].format(name=name, n=n) for c in at.caption), name   # no weights
    kept = {k[1][0] for k in cached.memo().keys() if k[0] == "run_text"}
    assert kept == {str(env / "tiny-zh-en")}
    gc.collect()
    assert {p for p, _ in cached.loaded_models() - before} <= {str(env / "tiny-zh-en")}        # nor their models: loaded, read, let go


@pytest.fixture(scope="module")
def snap_root(tmp_path_factory, pairs_tsv):  # noqa: F811
    root = tmp_path_factory.mktemp("snapckpts")
    work = tmp_path_factory.mktemp("snapwork")
    assert T.main(["--task", "translation", "--data", str(pairs_tsv), "--out", str(root / "tiny-trained"), "--work",
                   str(work), "--architecture", "prefix_lm", "--n-encoder-layers", "0", "--max-len", "64", "--epochs",
                   "2", "--batch-size", "8", "--n-test", "4", "--n-val", "4", "--eval-limit", "4",
                   "--snapshot-bleu-n", "4", *TINY]) == 0
    return root


@pytest.mark.train          # the module fixture snap_root trains a tiny prefix LM
def test_training_page_plays_back_the_snapshots(snap_root, ckpt_root, monkeypatch):
    shutil.copytree(ckpt_root / "tiny-zh-en", snap_root / "tiny-zh-en", dirs_exist_ok=True)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(snap_root))
    snaps = load_training_snapshots(snap_root / "tiny-trained")
    at = open_app("viz_explorer/pages/train/attention_over_training.py", "tiny-trained")
    name = "decoder.0.self_attn.hook_pattern"
    heat = figure(at, f"{name}, head 0, step 0")
    assert np.allclose(array(heat["data"][0]["z"]), snaps.pattern(0, 0, name)[0].numpy(), atol=1e-3)
    assert snaps.translations[0][0] in [c.value for c in at.text] or snaps.translations[0][0] == ""
    by_key(at.button, "tr_next").click().run()
    step1 = snaps.steps[1]
    heat = figure(at, f"{name}, head 0, step {step1}")
    assert np.allclose(array(heat["data"][0]["z"]), snaps.pattern(1, 0, name)[0].numpy(), atol=1e-3)
    curves = figure(at, "Loss and BLEU")
    assert any(s.get("x0") == step1 for s in curves["layout"]["shapes"])          # the current step is marked
    shutil.copytree(snap_root / "tiny-trained", snap_root / "tiny-trained-copy", dirs_exist_ok=True)
    at2 = open_app("viz_explorer/pages/train/attention_over_training.py", "tiny-zh-en")
    hint = next(i.value for i in at2.info if "has no recorded training snapshots" in i.value)
    have = sorted(p.parent.name for p in snap_root.glob("*/training_snapshots.json"))
    assert have == ["tiny-trained", "tiny-trained-copy"]        # a second of one architecture is named too
    assert hint.endswith(", ".join(have) + ".") and "tiny-zh-en," not in hint


@pytest.mark.train          # a fine-tune of the module's tiny prefix LM, with its own playback
def test_a_fine_tunes_playback_names_its_start_and_never_says_random_weights(snap_root, tmp_path, pairs_tsv,
                                                                             monkeypatch):
    base = snap_root / "tiny-trained"
    tuned_root = tmp_path / "ckpts"
    assert T.main(["--task", "translation", "--data", str(pairs_tsv), "--out", str(tuned_root / "tiny-tuned"),
                   "--work", str(tmp_path / "work"), "--init-from", str(base), "--epochs", "1", "--batch-size", "8",
                   "--n-test", "4", "--n-val", "4", "--eval-limit", "4", "--snapshot-bleu-n", "4"]) == 0
    shutil.copytree(base, tuned_root / "tiny-trained")
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(tuned_root))
    updates = load_checkpoint(base).meta["val"]["step"]          # the base run's shipped step, its own record
    for lang, table in ((None, EN), ("zh", ZH_STRINGS)):
        at = open_app("viz_explorer/pages/train/attention_over_training.py", "tiny-tuned", lang=lang)
        assert not at.exception
        said = texts(at) + " ".join(w.value for w in at.warning) + " ".join(c.value for c in at.caption)
        assert table["tr.start_random"] not in said                  # the sentence that says "random weights"
        note = next(w.value for w in at.warning if "tiny-trained" in w.value)
        assert f"{updates:,}" in note and "tiny-trained" in note
        scratch = open_app("viz_explorer/pages/train/attention_over_training.py", "tiny-trained", lang=lang)
        assert table["tr.start_random"] in [c.value for c in scratch.caption]
        assert not any("tiny-trained" in w.value for w in scratch.warning)
