"""The BERT of our own (checkpoints/zh-en-bert, made by train.py --task mlm): small enough to ship, its recorded
fill-in accuracy recomputed on its held-out split, every page open on it in both languages, the Overview naming it
as the tutorials' BERT from its config, its playback from random weights, and a blank filled as the model fills it."""
from __future__ import annotations

from pathlib import Path

import pytest

from app_util import ROOT, figure, md_unescape, open_app, page_file, texts
from app_util import tables as static_tables
from viz_transformer import load_checkpoint
from viz_transformer.run.fill_mask import fill_blanks
from viz_transformer.training import masked_lm as M
from viz_transformer.training.snapshots import load_training_snapshots
from viz_explorer.kit.registry import PAGES
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH

FOLDER = ROOT / "checkpoints" / "zh-en-bert"
BLANK = "我是一名工[MASK]师。"


@pytest.fixture(scope="module")
def bert():
    return load_checkpoint(FOLDER)


@pytest.fixture
def shipped(monkeypatch) -> Path:
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    return ROOT / "checkpoints"


def test_it_is_a_small_masked_lm_with_bert_pieces(bert):
    size = sum(f.stat().st_size for f in FOLDER.iterdir() if f.is_file())
    assert size <= 40 * 2 ** 20, f"{size:,} bytes"
    cfg = bert.cfg
    assert (cfg.architecture, cfg.head, cfg.norm, cfg.positional, cfg.type_vocab_size) == \
        ("encoder_only", "mlm", "post", "learned", 2)
    run = bert.run("我是学生。 [SEP] I am a student.")
    assert run.src_pieces[0] == "[CLS]" and run.src_pieces.count("[SEP]") == 2
    assert list(run.input.segments) == [0] * (run.src_pieces.index("[SEP]") + 1) + \
        [1] * (len(run.src_pieces) - run.src_pieces.index("[SEP]") - 1)


@pytest.mark.slow
def test_its_recorded_accuracy_is_the_held_out_accuracy(bert, training_data):
    import viz_transformer.training.train as T
    meta = bert.meta
    tc = T.TrainConfig(**{k: v for k, v in meta["train_config"].items() if k in T.TrainConfig.__dataclass_fields__})
    tc.data = str(training_data / "zh-en" / "tatoeba-cmn-eng.tsv")
    test = T.TASKS["mlm"](tc, {}).test
    assert meta["test"] == M.fill_scores(bert.model, bert.tokenizer, test)
    assert meta["test"]["n_zh"] >= 1400 and meta["test"]["n_en"] >= 1400


def test_the_overview_names_it_from_its_config_in_both_languages(shipped, bert):
    cfg = bert.cfg
    for lang, table in (("en", EN), ("zh", ZH)):
        at = open_app(ckpt="zh-en-bert", text=BLANK, lang=lang)
        shown = md_unescape(texts(at))
        want = table["ov.family.bert"].split("{")[0]
        assert want in shown
        note = next(line for line in shown.splitlines() if want in line)
        assert f"{cfg.n_encoder_layers}" in note and f"{cfg.n_heads}" in note and f"{cfg.d_model}" in note
        assert "tatoeba-cmn-eng.tsv" in note
        metrics = {m.label: m.value for m in at.metric}
        assert metrics[table["ov.m.test_top5_zh"]] == f"{bert.meta['test']['top5_zh']:.1%}"
        assert metrics[table["ov.m.test_top5_en"]] == f"{bert.meta['test']['top5_en']:.1%}"


def test_the_lens_page_fills_the_blank_as_the_model_does(shipped, bert):
    at = open_app(page_file("lens"), ckpt="zh-en-bert", text=BLANK)
    top = fill_blanks(bert, bert.run(BLANK))[0].top
    tables = [t.value for t in at.dataframe] + static_tables(at)
    assert any(top[0][0] in df.iloc[:, 0].astype(str).tolist() for df in tables if len(df.columns))


def test_its_playback_starts_from_random_weights(shipped, bert):
    snaps = load_training_snapshots(FOLDER)
    assert snaps.steps[0] == 0 and snaps.metric == "fill_top5" and snaps.texts == M.SNAPSHOT_TEXTS
    assert snaps.shipped_step == bert.meta["val"]["step"]
    assert snaps.bleu[0] < snaps.bleu[snaps.shipped_index]           # it learned
    at = open_app(page_file("training"), ckpt="zh-en-bert", text=BLANK)
    shown = texts(at)
    assert EN["tr.start_random"] in shown and EN["tr.mlm_note"] in shown
    label = EN["tr.m_fill_top5"].replace("{n:sentence|sentences}", "sentences").format(n=snaps.bleu_n)
    assert {m.label: m.value for m in at.metric}[label] == f"{snaps.bleu[0]:.1f}"
    figure(at, EN["tr.curves_mlm"].split(" (")[0])


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_opens_on_it(shipped, lang):
    for spec in PAGES:
        at = open_app(page_file(spec.name), ckpt="zh-en-bert", text=BLANK, lang=lang)
        assert not at.exception and not at.error, (spec.name, [e.value for e in at.exception + at.error])


@pytest.mark.parametrize("text", ["我是一名工程师。", "[MASK]" * 10, "[MASK]是一名工程师。", "我是一名工程师[MASK]", "[MASK]",
                                  "<b>[MASK]</b> 🍎 [SEP] [SEP]"])
def test_odd_blanks_get_a_message_or_an_answer_never_a_crash(shipped, bert, text):
    """No [MASK], ten of them, a blank at the first or the last piece, only a blank, markup and emoji around it:
    the blank page either fills every blank the text has, as the model does, or says how to make one."""
    at = open_app(page_file("lens"), ckpt="zh-en-bert", text=text)
    assert not at.exception and not at.error, [e.value for e in at.exception + at.error]
    blanks = fill_blanks(bert, bert.run(text))
    shown = md_unescape(texts(at))
    if not blanks:
        assert EN["fb.no_mask"].format(mask="[MASK]") in shown
    else:
        assert EN["fb.no_mask"].format(mask="[MASK]") not in shown
        tables = [t.value for t in at.dataframe] + static_tables(at)
        firsts = {str(df.iloc[0, 0]) for df in tables if len(df) and len(df.columns)}
        assert {b.top[0][0] for b in blanks} <= firsts


def test_the_docs_state_its_recorded_accuracy_and_size(bert):
    t = bert.meta["test"]
    size = sum(f.stat().st_size for f in FOLDER.iterdir() if f.is_file()) / 2 ** 20
    for path in (ROOT / "docs" / "models.md", ROOT / "docs" / "zh-CN" / "models.md"):
        row = next(x for x in path.read_text(encoding="utf-8").splitlines() if x.startswith("| `checkpoints/zh-en-bert`"))
        for k in ("top5_zh", "top5_en", "top1_zh", "top1_en"):
            assert f"{100 * t[k]:.1f}%" in row, (path.name, k)
        assert f"{size:.1f} MB" in row
        assert t["top5_zh"] >= 0.5 and t["top5_en"] >= 0.5           # the goal: top-5 ≥ 0.5 in each language


def test_its_sidebar_offers_blanks_and_no_script_warning(shipped):
    """A masked LM's examples hold a blank in both of its languages; read on both sides of the pairs, it warns of no
    script (the Chinese example and the English one alike)."""
    from viz_explorer.server.defaults import MLM_EXAMPLES
    from viz_transformer.analysis import scripts
    assert scripts.model_script(load_checkpoint(FOLDER).tokenizer, load_checkpoint(FOLDER).meta) is None
    for text in (MLM_EXAMPLES[0], MLM_EXAMPLES[1]):
        at = open_app(ckpt="zh-en-bert", text=text)
        assert list(next(p for p in at.button_group if p.key == "example").options) == MLM_EXAMPLES
        assert not [w.value for w in at.warning if "expect nonsense" in w.value]
    for ex in MLM_EXAMPLES:
        assert fill_blanks(load_checkpoint(FOLDER), load_checkpoint(FOLDER).run(ex))          # each has a blank
