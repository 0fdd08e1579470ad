"""When to distrust an output (viz_transformer/analysis/confidence.py): the numbers against a full recompute with
the model's own forward, the thresholds against an independent re-derivation with sacrebleu, the
shipped checkpoints' verdicts on outputs a reader called nonsense, and the line and the warning
on the app's pages."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import sacrebleu
import torch
from streamlit.testing.v1 import AppTest

from app_util import APP, ZH, open_app, open_tab, texts, page_file
from viz_transformer.analysis import confidence as C
from viz_transformer.training import calibration
from viz_transformer.training import data as D
from viz_transformer import decode, DecodeSettings, list_checkpoints, load_checkpoint
from viz_transformer.core import recipes
from viz_transformer.run.decoding import greedy_ids
from viz_transformer.training.evaluation import translation_splits

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "checkpoints"
SCRIPT = "<script>alert(1)</script>"
# a 56-character everyday story, longer than every Tatoeba sentence (at most 44 characters)
LONG = "昨天晚上我和几个老朋友在一家新开的餐馆吃饭，我们聊了很多关于工作和生活的事情，大家都很开心，最后一起坐车回家了。"


@pytest.fixture(scope="module")
def shipped():
    return {p.name: load_checkpoint(p) for p in sorted(SHIPPED.iterdir()) if (p / "config.json").is_file()}


def _reference(hm, text: str, tr):
    """Log-probs of a greedy trace's tokens ([end] included) and, for an LM, its prompt's perplexity,
    from one plain forward of the model over the teacher-forced ids (no run, no cache)."""
    cfg, tok = hm.cfg, hm.tokenizer
    out = tr.output_ids                                                # ends with [end] when the model ended
    with torch.no_grad():
        if cfg.is_encoder_decoder:
            logits = hm.model(torch.tensor([tr.src_ids]), torch.tensor([[cfg.bos_id] + out[:-1]]))[0]
            start = 0
        else:
            seq = tr.prompt_ids + out
            logits = hm.model(torch.tensor([seq[:-1]]),
                              prefix_len=len(tr.prompt_ids) if cfg.architecture == "prefix_lm" else None)[0]
            start = len(tr.prompt_ids) - 1
    logp = torch.log_softmax(logits, -1)
    lp = torch.stack([logp[start + i, t] for i, t in enumerate(out)])
    ppl = None
    if not cfg.is_translator:
        p = tr.prompt_ids
        ppl = math.exp(-sum(logp[i, p[i + 1]].item() for i in range(len(p) - 1)) / (len(p) - 1))
    return lp, ppl


@pytest.mark.parametrize("name,text", [("zh-en", ZH), ("zh-en", SCRIPT), ("zh-en-decoder", ZH),
                                       ("zh-en-prefix", LONG), ("en-stories", "Once upon a time")])
def test_the_numbers_are_a_full_recompute(shipped, name, text):
    hm = shipped[name]
    run = hm.run(text)
    tr = decode(hm, text, DecodeSettings("greedy", max_new_tokens=64))
    lp, ppl = _reference(hm, text, tr)
    c = C.assess(hm, run)
    assert c.n_tokens == len(lp)
    assert c.mean_logprob == pytest.approx(lp.mean().item(), abs=1e-4)
    assert c.min_prob == pytest.approx(lp.exp().min().item(), abs=1e-4)
    if ppl is not None:
        assert c.prompt_ppl == pytest.approx(ppl, rel=1e-4)
    # the batched scorer used by the calibration agrees with the run, padding and all
    others = ["我是学生。", LONG] if hm.cfg.is_translator else ["The little dog", "Lily and Tom went to the park."]
    outs = [hm.run(x).output_ids for x in others] + [run.output_ids]
    scores = C.batch_scores(hm, others + [text], outs, ended=[True, True, tr.output_ids[-1] == hm.cfg.eos_id])
    assert scores[-1][0] == pytest.approx(c.mean_logprob, abs=1e-4)


@pytest.mark.usefixtures("training_data")      # its splits: ../shared/data
def test_rare_pieces_are_counted_from_the_training_sources(shipped):
    hm = shipped["zh-en"]
    train, _, _ = translation_splits(hm.meta)
    counts = {}
    for s in {s for s, _ in train}:
        for i in hm.tokenizer.encode(s):
            counts[i] = counts.get(i, 0) + 1
    stored = hm.meta["confidence"]["pieces"]
    common = C.unbits(stored["common"])
    assert common == {i for i, n in counts.items() if n >= C.RARE_BELOW}
    assert C.unbits(stored["seen"]) == set(counts)
    ids = hm.tokenizer.encode(SCRIPT)
    c = C.assess(hm, hm.run(SCRIPT))
    assert (c.n_pieces, c.n_rare, c.n_unseen) == (len(ids), sum(counts.get(i, 0) < C.RARE_BELOW for i in ids),
                                                 sum(i not in counts for i in ids))
    assert len(json.dumps(hm.meta["confidence"])) < 16_000                         # the stats stay small


@pytest.mark.slow          # 120 translations and a BLEU per prefix
@pytest.mark.usefixtures("training_data")      # its splits: ../shared/data
def test_tau_is_the_rule_in_the_docstring():
    """choose_tau against a brute force with sacrebleu's own corpus_bleu on every prefix."""
    hm = load_checkpoint(SHIPPED / "zh-en")
    train, val, _ = translation_splits(hm.meta)
    val = D.unseen_sources(val, train)[0][:120]
    texts_ = [s for s, _ in val]
    ids = greedy_ids(hm.model, hm.tokenizer, texts_)
    outs = [hm.tokenizer.decode(o) for o in ids]
    scores = [s[0] for s in C.batch_scores(hm, texts_, ids)]
    refs = [t for _, t in val]
    tau, n = calibration.choose_tau(scores, outs, refs)
    order = sorted(range(len(val)), key=lambda i: scores[i])
    ok = [k for k in range(C.MIN_FLAGGED, len(val))
          if sacrebleu.corpus_bleu([outs[i] for i in order[:k]], [[refs[i] for i in order[:k]]]).score < C.BAR_BLEU]
    assert ok and n == max(ok)
    below = [i for i in range(len(val)) if scores[i] < tau]
    assert len(below) == n
    assert sacrebleu.corpus_bleu([outs[i] for i in below], [[refs[i] for i in below]]).score < C.BAR_BLEU


def test_every_shipped_checkpoint_is_calibrated_and_its_test_split_is_evaluate_s(shipped):
    for name, hm in shipped.items():
        if hm.cfg.is_encoder_only:          # a masked LM writes no output to doubt: nothing to calibrate
            assert "confidence" not in hm.meta
            continue
        cal = hm.meta["confidence"]
        assert cal["how"] and cal["command"].endswith(f"checkpoints/{name}")
        if hm.cfg.is_translator:
            # the calibration's test outputs are exactly the ones `evaluate` scored
            assert cal["test"]["all"]["bleu"] == hm.meta["test"]["bleu"]
            assert cal["test"]["flagged"]["bleu"] < C.BAR_BLEU + 5 < cal["test"]["unflagged"]["bleu"]
        else:
            assert {"prompt_ppl", "mean_logprob"} <= set(cal["thresholds"])


@pytest.mark.parametrize("name,text", [
    ("zh-en", SCRIPT), ("zh-en", LONG), ("zh-en-postnorm", LONG), ("zh-en-decoder", LONG), ("zh-en-prefix", LONG),
    ("zh-en-postnorm", SCRIPT), ("zh-en-decoder", SCRIPT), ("zh-en-prefix", SCRIPT),
    ("en-stories", ZH), ("en-stories", SCRIPT),
])
def test_the_nonsense_outputs_are_flagged(shipped, name, text):
    hm = shipped[name]
    run = hm.run(text)
    assert C.assess(hm, run).flagged, (name, run.output)


@pytest.mark.parametrize("name,text,output", [("zh-en", ZH, "I'm an engineer."), ("zh-en", "我是学生。", None),
                                              ("zh-en-postnorm", ZH, "I'm an engineer."),
                                              ("zh-en-decoder", ZH, "I'm an engineer."), ("zh-en-prefix", ZH, "I'm an engineer."),
                                              ("zh-en-postnorm", "怎么去车站？", "How do you get to the station?")])
def test_good_outputs_are_not_flagged(shipped, name, text, output):
    hm = shipped[name]
    run = hm.run(text)
    if output is not None:
        assert run.output == output
    c = C.assess(hm, run)
    assert not c.flagged, (name, run.output, c)


# -- the app --------------------------------------------------------------------------------------------
def _open(page: str, ckpt: str, text: str, lang: str = "en") -> AppTest:
    return open_app(page_file(page), ckpt, text, lang=lang, timeout=120)


@pytest.fixture
def shipped_env(monkeypatch):
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(SHIPPED))


def _line(hm, text: str):
    """The page's confidence line for a text, from the model's own numbers recomputed here; and the verdict."""
    c = C.assess(hm, hm.run(text))
    return (f"confidence: mean log-prob −{-c.mean_logprob:.2f} (p≈{math.exp(c.mean_logprob):.2f} per token) · "
            f"{c.n_rare} of {c.n_pieces} pieces rare"), c


def test_the_overview_shows_the_line_and_warns_only_on_nonsense(shipped_env):
    at = _open("overview", "zh-en-decoder", SCRIPT)
    line, c = _line(at.session_state["_viz_ctx"].hm, SCRIPT)
    assert c.flagged and any(x.value.startswith(line) for x in at.caption), [x.value for x in at.caption]
    warn = [w.value for w in at.warning if w.value.startswith("Don't trust this output")]
    assert len(warn) == 1 and "BLEU" in warn[0]
    at = _open("overview", "zh-en", ZH)
    line, c = _line(at.session_state["_viz_ctx"].hm, ZH)
    assert not c.flagged and any(x.value.startswith(line) for x in at.caption), [x.value for x in at.caption]
    assert not [w for w in at.warning if w.value.startswith("Don't trust")]


def test_compare_architectures_says_which_model_to_distrust(shipped_env):
    at = _open("architectures", "zh-en", SCRIPT, lang="zh")
    open_tab(at, "ar", "reads")
    shown = texts(at)
    assert "置信度：平均对数概率" in shown
    weak = [w.value for w in at.warning if w.value.startswith("这个模型太小或训练不足")]
    unsure = [w.value for w in at.warning if w.value.startswith("这句话上不能信它")]
    trio = [load_checkpoint(i.path) for i in recipes.comparison(list_checkpoints(SHIPPED)).values()]  # the page's
    flagged = [hm for hm in trio if C.assess(hm, hm.run(SCRIPT)).flagged]
    assert flagged and len(weak) + len(unsure) == len(flagged)
    assert len(weak) == sum(hm.meta["test"]["bleu"] < 20 for hm in flagged)     # weak in general: test BLEU < 20


@pytest.mark.slow          # five pages of a shipped model
def test_every_page_with_an_output_shows_the_line_and_the_warning(shipped_env):
    at = _open("overview", "zh-en-decoder", SCRIPT)           # an output the model flags (the test above)
    want = {"decoding": 1, "knockout": 2, "positions": 2, "compare": 2, "patching": 2}   # outputs on the page
    at.session_state["pt_text_translator"] = "<script>alert(2)</script>"    # patching's second text: as many pieces
    for page, n in want.items():
        at.switch_page(page_file(page))
        at.run(timeout=120)
        assert not at.exception, (page, [e.value for e in at.exception])
        if page == "decoding":                 # the line comes with the last step
            at.session_state["dc_step"] = 10_000
            at.run(timeout=120)
        lines = [c.value for c in at.caption if c.value.startswith("confidence: ")]
        assert len(lines) == n, (page, lines)
        assert any(w.value.startswith("Don't trust this output") for w in at.warning), page


# -- the warning's rules and its classifier ------------------------------------------------------------
def _repeats(text: str, n: int) -> bool:
    """Reference: some word n-gram (lower case, punctuation dropped) occurs at least twice."""
    import collections
    import re
    words = [w.strip(".,!?;:\"“”") for w in text.lower().split()]
    words = [w for w in words if w]
    grams = collections.Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    return any(c > 1 for c in grams.values())


@pytest.mark.parametrize("text", ["It'll take an umbrella tomorrow, it's going to take an umbrella tomorrow.",
                                  "I am a student.", "the the the", "He said no. He said no.", "",
                                  "Take an umbrella. Take an Umbrella!"])
def test_a_repeated_word_trigram_is_found_as_a_reference_count_finds_it(text):
    assert bool(C.repeated_ngram(text)) == _repeats(text, 3)


def test_a_looping_translation_is_flagged_whatever_the_model_thinks_of_it(shipped):
    hm = shipped["zh-en-postnorm"]
    loop = "It'll take an umbrella tomorrow, it's going to take an umbrella tomorrow."
    c = C.assess(hm, hm.run("明天会下雨，记得带伞。", target=loop))
    assert "repetition" in c.reasons and c.repeat == "take an umbrella"


@pytest.mark.parametrize("name", ["zh-en-postnorm", "zh-en"])
def test_a_character_read_as_bytes_is_named_and_flagged(shipped, name):
    hm = shipped[name]
    vocab = {hm.tokenizer.sp.id_to_piece(i).lstrip("\u2581") for i in range(hm.tokenizer.vocab_size)
             if not hm.tokenizer.sp.is_unused(i)}
    assert "饺" not in vocab and "餐" in vocab
    c = C.assess(hm, hm.run("这家餐厅的饺子很好吃。"))
    assert c.byte_chars == [("饺", len("饺".encode("utf-8")))] and "unknown_characters" in c.reasons
    assert "饺 is not in this model's vocabulary: it reads it as 3 bytes" in " ".join(C.reasons_text(c, hm.meta["confidence"]))


def test_the_wilson_bound_is_scipys():
    from scipy.stats import binomtest
    for k, n in ((0, 348), (12, 348), (13, 348), (30, 547), (5, 20)):
        want = binomtest(k, n).proportion_ci(confidence_level=0.8, method="wilson").high   # one side of 80% = 90%
        assert calibration.wilson_upper(k, n) == pytest.approx(want, abs=1e-9)


def test_the_classifier_keeps_its_false_alarms_under_the_goal_on_a_labelled_set_built_here():
    gen = torch.Generator().manual_seed(0)
    n_f = len(C.FEATURES)

    def sample(n, shift):                           # bad outputs: lower log-probabilities, higher entropy
        x = torch.randn(n, n_f, generator=gen, dtype=torch.float64)
        x[:, 0] -= shift
        x[:, 5] += shift
        return x.tolist()
    fit_x = sample(400, 0.0) + sample(200, 2.0)
    labels = ["good"] * 400 + ["bad"] * 200
    clf = calibration.fit_classifier(fit_x, labels)
    k, n = clf["good_flagged"]["k"], clf["good_flagged"]["n"]
    assert n == 400 and calibration.wilson_upper(k, n) <= C.GOAL_FALSE_ALARMS < calibration.wilson_upper(k + 1, n)
    assert sum(C.classifier_score(clf, x) > clf["threshold"] for x in fit_x[:400]) == k
    fresh_good, fresh_bad = sample(5000, 0.0), sample(5000, 2.0)
    false_alarms = sum(C.classifier_score(clf, x) > clf["threshold"] for x in fresh_good) / 5000
    recall = sum(C.classifier_score(clf, x) > clf["threshold"] for x in fresh_bad) / 5000
    assert false_alarms <= C.GOAL_FALSE_ALARMS
    # the best any threshold on the true log-odds direction can do at that false-alarm rate (two unit Gaussians
    # 2·√2 apart along (−1, 0, 0, 0, 0, 1, 0, 0, 0)): the fitted direction comes within 0.05 of it
    from scipy.stats import norm
    best = 1 - norm.cdf(norm.ppf(1 - false_alarms) - 2 * math.sqrt(2))
    assert best - 0.05 < recall <= best + 0.02


@pytest.mark.usefixtures("training_data")
def test_the_apps_verdict_on_one_run_is_the_calibrations_on_the_batch(shipped):
    """assess on each run's own logits flags exactly what the batched features of calibration flag."""
    hm = shipped["zh-en-postnorm"]
    cal = hm.meta["confidence"]
    train, _, test = translation_splits(hm.meta)
    test = D.unseen_sources(test, train)[0][:60]
    texts_ = [s for s, _ in test]
    outs = greedy_ids(hm.model, hm.tokenizer, texts_)
    batch = C.batch_scores(hm, texts_, outs, token_lp=True, spreads=True)
    for text, (lp, _, src, rows) in zip(texts_, batch):
        c = C.assess(hm, hm.run(text))
        assert c.score == pytest.approx(C.classifier_score(cal["classifier"], C.features(lp, *rows, len(src))),
                                        abs=1e-3)


@pytest.mark.parametrize("text", ["🍎🍎🍎", "abc xyz", "饺饺饺", "<b>&amp;</b>"])
def test_odd_inputs_get_a_reason_in_words_and_never_a_crash(shipped, text):
    hm = shipped["zh-en-postnorm"]
    c = C.assess(hm, hm.run(text))
    cal = hm.meta["confidence"]
    assert len(C.reasons_text(c, cal)) >= len(c.reasons)             # every reason said in words
    assert C.line(c).startswith("confidence: ") and json.dumps(C.as_dict(c, cal))
    # reference: SentencePiece's own byte pieces (<0xE9> ...), their bytes decoded, one character each
    raw = bytes(int(p[3:5], 16) for p in hm.tokenizer.sp.encode(text, out_type=str) if p.startswith("<0x"))
    assert [ch for ch, _ in c.byte_chars] == list(raw.decode("utf-8"))     # each character read as bytes is named


def test_an_output_cut_at_the_limit_and_an_empty_one_are_said_in_words(shipped):
    from viz_transformer import DecodeSettings
    hm = shipped["zh-en-postnorm"]
    text = "我们明天早上八点在学校门口见面。"
    tr = decode(hm, text, DecodeSettings(max_new_tokens=2))
    c = C.assess_ids(hm, text, tr.generated_ids, False)
    assert "cut_off" in c.reasons and "length limit" in " ".join(C.reasons_text(c, hm.meta["confidence"]))
    empty = C.assess_ids(hm, text, [], True)
    assert empty.n_tokens == 1 and C.line(empty).startswith("confidence: ")   # [end] alone is scored
