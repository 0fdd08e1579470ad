"""What is shown is what was computed: the captured run uses the very ids the model generated, one
truncation rule, special tokens never generated, limits enforced by the library, an atomic KV cache."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from conftest import ROOT, STORIES, TATOEBA
from viz_transformer import decode, DecodeSettings, load_checkpoint
from viz_transformer.run import capture
from viz_transformer.training import data as D
from viz_transformer.run.capture import HookedModel
from viz_transformer.cli import main as cli_main
from viz_transformer.run.decoding import greedy_ids
from viz_transformer.core.encoding import MAX_CHARS, encode_prompt, encode_source
from viz_transformer.core.hook_names import decoder_blocks, hook_name

needs_data = pytest.mark.usefixtures("training_data")      # skips without ../shared/data (conftest.skip_or_fail)


@pytest.fixture(scope="module")
def zh_en():
    return load_checkpoint(ROOT / "checkpoints" / "zh-en")


@pytest.fixture(scope="module")
def stories():
    return load_checkpoint(ROOT / "checkpoints" / "en-stories")


def assert_run_is_the_trace(run, trace):
    """run.tgt_ids after the prompt = the trace's ids (no [end]); every step's recorded attention
    row (KV cache, one token at a time) = the captured row of the teacher-forced forward."""
    assert run.tgt_ids[: run.prompt_len] == trace.prompt_ids
    assert run.tgt_ids[run.prompt_len:] == trace.generated_ids == run.output_ids
    first = run.prompt_len - 1                  # the query row that chose the first output token
    n = min(len(trace.steps), len(run.tgt_ids) - first)
    for block in decoder_blocks(run_cfg(run)):
        for layer in range(run.cache.n_layers["decoder"]):
            name = hook_name(block, layer, "hook_pattern")
            captured = run.cache[name][0, :, first:first + n, :]                 # (head, step, key)
            stacked = trace.pattern(name)[:, :n]
            K = stacked.shape[-1]                 # the last output token was never a query: one key fewer
            torch.testing.assert_close(stacked, captured[..., :K], atol=1e-5, rtol=0, msg=name)
            assert (captured[..., K:] == 0).all()


def run_cfg(run):
    class _C:      # decoder_blocks needs only is_encoder_decoder
        is_encoder_decoder = run.src_ids is not None
    return _C


# -- 1. the capture uses the generated ids -------------------------------------------------------------
@pytest.mark.slow          # 300 sentences of the test split
@needs_data
def test_translator_run_is_teacher_forced_on_its_own_greedy_ids(zh_en):
    tok = zh_en.tokenizer
    _, _, test = D.split(D.read_pairs(TATOEBA), 1234, 1500, 1000)
    texts = [s for s, _ in test[:600]]
    unstable = 0
    for i, text in enumerate(texts):
        run = zh_en.run(text)
        if i % 25 == 0:                          # the run's trace is decode()'s greedy trace
            assert decode(zh_en, text, DecodeSettings("greedy", max_new_tokens=64)).output_ids == run.trace.output_ids
        assert_run_is_the_trace(run, run.trace)
        assert run.output == tok.decode(run.output_ids)
        unstable += tok.encode(run.output) != run.output_ids
        if i >= 299 and unstable >= 3:           # 300 sentences at least, until three such are covered
            break
    assert unstable >= 3          # sentences whose text round trip changes the pieces were covered


@pytest.mark.slow          # 60 stories
@needs_data
def test_lm_run_captures_prompt_and_continuation(stories):
    tok = stories.tokenizer
    docs = D.read_stories(STORIES)[:60]
    for doc in docs:
        prompt = doc.split(".")[0][:120]
        run = stories.run(prompt, max_new_tokens=20)
        trace = decode(stories, prompt, DecodeSettings("greedy", max_new_tokens=20))
        assert run.tgt_ids[1: run.prompt_len] == tok.encode(prompt)
        assert_run_is_the_trace(run, trace)


def test_run_agrees_with_trace_for_every_architecture(tiny_translator, tiny_lm, ckpt_root):
    prefix = load_checkpoint(ckpt_root / "tiny-prefix")
    for hm in (tiny_translator, tiny_lm, prefix):
        for text in ("我是学生。", "The cat sat on the mat."):
            run = hm.run(text, max_new_tokens=12)
            assert_run_is_the_trace(run, decode(hm, text, DecodeSettings("greedy", max_new_tokens=12)))
            if hm.cfg.architecture == "prefix_lm":
                assert run.prefix_len == run.prompt_len


# -- 2. an LM keeps the end of a long prompt, and says how much was cut -----------------------------------
@needs_data
def test_long_story_prompt_keeps_its_end(stories):
    tok, L = stories.tokenizer, stories.cfg.max_len
    story = " ".join(D.read_stories(STORIES)[:6])
    ids = tok.encode(story)
    assert len(ids) > 3 * L
    trace = decode(stories, story, DecodeSettings("greedy", max_new_tokens=50))
    room = L - 1 - 50
    assert trace.prompt_ids == [stories.cfg.bos_id] + ids[-room:]
    assert trace.n_cut == len(ids) - room and trace.cut_at == "start"
    run = stories.run(story, max_new_tokens=50)
    assert run.tgt_ids[1: run.prompt_len] == ids[-(L - 1 - 50):]
    assert run.n_cut == len(ids) - room and run.cut_at == "start"


def test_truncation_rule_by_hand(tiny_translator, tiny_lm):
    tok, cfg = tiny_translator.tokenizer, tiny_translator.cfg
    text = "我是学生。" * 40
    ids = tok.encode(text)
    src = encode_source(tok, cfg, text)
    assert src.ids == ids[: cfg.max_len - 1] + [cfg.eos_id] and src.n_cut == len(ids) - (cfg.max_len - 1)
    assert src.cut_at == "end" and "last" in src.notice(cfg.max_len)
    p = encode_prompt(tiny_lm.tokenizer, tiny_lm.cfg, text, reserve=10)
    room = tiny_lm.cfg.max_len - 1 - 10
    lm_ids = tiny_lm.tokenizer.encode(text)
    assert p.ids == [tiny_lm.cfg.bos_id] + lm_ids[-room:] and p.n_cut == len(lm_ids) - room
    assert p.cut_at == "start" and "first" in p.notice(tiny_lm.cfg.max_len)
    short = encode_prompt(tiny_lm.tokenizer, tiny_lm.cfg, "I love you.")
    assert short.n_cut == 0 and short.notice(64) == ""


# -- 3. the CLI prints prompt and continuation decoded together ------------------------------------------
def test_cli_generate_decodes_prompt_and_continuation_together(tiny_lm, ckpt_root, capsys):
    text = "The little ca"                       # ends inside a word: no space may be guessed
    assert cli_main(["generate", "--checkpoint", str(ckpt_root / "tiny-lm"), "--text", text,
                     "--max-new-tokens", "6"]) == 0
    out = capsys.readouterr().out.rstrip("\n")
    tr = decode(tiny_lm, text, DecodeSettings("greedy", max_new_tokens=6))
    tok = tiny_lm.tokenizer
    expected = tok.sp.decode(tok.encode(text) + [i for i in tr.output_ids if i not in tok.specials])
    assert out == expected and out.startswith(text)


def test_cli_reports_a_cut_prompt_on_stderr(ckpt_root, capsys):
    assert cli_main(["generate", "--checkpoint", str(ckpt_root / "tiny-lm"), "--text", "I love you. " * 60,
                     "--max-new-tokens", "4"]) == 0
    err = capsys.readouterr().err
    assert "cut from its start" in err


# -- 4. run(text, target) on an LM appends the target ----------------------------------------------------
def test_lm_run_with_target_appends_and_captures_it(tiny_lm):
    tok, cfg = tiny_lm.tokenizer, tiny_lm.cfg
    run = tiny_lm.run("I am a student.", target=" I love you.")
    ids = [cfg.bos_id] + tok.encode("I am a student.") + tok.encode(" I love you.")
    assert run.tgt_ids == ids and run.trace is None
    assert run.output_ids == tok.encode(" I love you.") and run.prompt_len == 1 + len(tok.encode("I am a student."))
    ref = tiny_lm.model(torch.tensor([ids]))[0]
    torch.testing.assert_close(run.logits, ref, atol=1e-5, rtol=1e-5)
    assert run.cache["decoder.0.self_attn.hook_pattern"].shape[-1] == len(ids)


# -- 5. [pad], [begin], [unk] are never generated ---------------------------------------------------------
def favouring(hm, ids, bias=50.0) -> HookedModel:
    """A copy whose output layer strongly favours `ids`."""
    model = copy.deepcopy(hm.model)
    head = torch.nn.Linear(model.cfg.d_model, model.cfg.vocab_size)
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[ids] = bias
    model.lm_head = head
    return HookedModel(model, hm.tokenizer)


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_special_tokens_are_never_generated(tiny_translator, tiny_lm, strategy):
    for base in (tiny_translator, tiny_lm):
        tok = base.tokenizer
        specials = [tok.pad_id, tok.unk_id, tok.bos_id]
        hm = favouring(base, specials)
        tr = decode(hm, "我是学生。", DecodeSettings(strategy, max_new_tokens=6, beam_width=3))
        assert tr.steps and not set(tr.output_ids) & set(specials)
        for step in tr.steps:
            assert not {c.id for c in step.candidates} & set(specials)
            for b in step.beams or []:
                assert not set(b.tokens) & set(specials)
        fast = greedy_ids(hm.model, tok, ["我是学生。", "I love you."], 6)      # the batched path too
        assert fast[0] and not set(fast[0] + fast[1]) & set(specials)
        run = hm.run("我是学生。", max_new_tokens=6)
        assert not set(run.output_ids) & set(specials)


# -- 6. limits belong to the library ---------------------------------------------------------------------
BAD = [dict(beam_width=5000, strategy="beam"), dict(beam_width=0, strategy="beam"), dict(top_p=0.0, strategy="sample"),
       dict(top_p=1.5, strategy="sample"), dict(top_k=-1, strategy="sample"), dict(top_k=10**6, strategy="sample"),
       dict(temperature=0.0, strategy="sample"), dict(temperature=float("nan"), strategy="sample"),
       dict(n_candidates=0), dict(n_candidates=51), dict(max_new_tokens=0), dict(max_new_tokens=10**6),
       dict(length_penalty=float("inf"), strategy="beam"), dict(beam_width=2.5, strategy="beam")]


@pytest.mark.parametrize("bad", BAD, ids=[",".join(f"{k}={v}" for k, v in b.items()) for b in BAD])
def test_decode_refuses_out_of_range_parameters_before_allocating(tiny_translator, bad, monkeypatch):
    hm = copy.copy(tiny_translator)
    hm.model = copy.deepcopy(tiny_translator.model)

    def boom(*a, **k):
        raise AssertionError("the model ran before the parameters were checked")
    monkeypatch.setattr(hm.model, "new_cache", boom)
    name = next(k for k in bad if k != "strategy")
    with pytest.raises(ValueError, match=name):
        decode(hm, "我是学生。", DecodeSettings(**bad))


def test_text_length_limit(tiny_translator):
    with pytest.raises(ValueError, match="20,000"):
        decode(tiny_translator, "我" * (MAX_CHARS + 1))
    with pytest.raises(ValueError, match="20,000"):
        tiny_translator.run("a" * (MAX_CHARS + 1))
    with pytest.raises(ValueError, match="max_new_tokens"):
        tiny_translator.run("我是学生。", max_new_tokens=0)
    assert decode(tiny_translator, "我" * MAX_CHARS, DecodeSettings(max_new_tokens=2)).n_cut > 0   # at the limit: cut


def test_cli_turns_a_bad_parameter_into_one_line_and_status_2(ckpt_root, capsys):
    code = cli_main(["translate", "--checkpoint", str(ckpt_root / "tiny-zh-en"), "--text", "我是学生。", "--beam",
                     "--beam-width", "5000"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "beam_width" in err and "16" in err


# -- 7. the KV cache is left untouched by a step that fails -------------------------------------------------
def test_kv_cache_update_is_atomic(tiny_lm):
    model, cfg = tiny_lm.model, tiny_lm.cfg
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, cfg.vocab_size, (1, cfg.max_len), generator=g)
    cache = model.new_cache()
    model.decode(ids[:, : cfg.max_len - 1], cache=cache)
    before = (cache.ids.clone(), [{k: (a.clone(), b.clone()) for k, (a, b) in layer.items()} for layer in cache.layers])
    with pytest.raises(ValueError, match="positions"):
        model.decode(ids[:, :2], cache=cache)                       # one past the end
    assert torch.equal(cache.ids, before[0])
    for layer, saved in zip(cache.layers, before[1]):
        for key, (k, v) in layer.items():
            assert torch.equal(k, saved[key][0]) and torch.equal(v, saved[key][1])
    last = model.decode(ids[:, cfg.max_len - 1:], cache=cache)[0, -1]   # and decoding goes on correctly
    torch.testing.assert_close(last, model(ids)[0, -1], atol=1e-5, rtol=1e-5)


# -- interventions pass through run and decode, for one call only ----------------------------------------
def test_fwd_hooks_change_run_and_decode_for_that_call_only(tiny_translator):
    hm = tiny_translator
    zero = [(f"decoder.{i}.cross_attn.hook_z", lambda z, hook: torch.zeros_like(z)) for i in range(2)]
    plain = hm.run("我是学生。", max_new_tokens=8)
    ablated = hm.run("我是学生。", max_new_tokens=8, fwd_hooks=zero)
    assert (ablated.cache["decoder.0.cross_attn.hook_z"] == 0).all()
    # with no cross-attention output, the decoder cannot see the source: two sources, one output
    other = hm.run("今天天气很好。", max_new_tokens=8, fwd_hooks=zero)
    assert other.output_ids == ablated.output_ids
    tr = decode(hm, "我是学生。", DecodeSettings("greedy", max_new_tokens=8), hooks=zero)
    assert tr.generated_ids == ablated.output_ids
    again = hm.run("我是学生。", max_new_tokens=8)
    assert again.output_ids == plain.output_ids and torch.equal(again.logits, plain.logits)
    with pytest.raises(ValueError, match="unknown hook name"):
        hm.run("我是学生。", fwd_hooks=[("decoder.0.crossattn.hook_z", lambda z, h: z)])


# -- runs the pages need (moved here from analysis: they run the model) -------------------------------------
def test_padded_batch_masks_pads_and_leaves_real_tokens_unchanged(tiny_translator):
    hm = tiny_translator
    long, short = "他是我的朋友，我们明天去北京。", "我爱你。"
    pb = capture.padded_batch(hm, long, short)
    assert pb.padded_row == 1
    pieces = pb.src_pieces[1]
    real = [p != "[pad]" for p in pieces]
    assert not all(real)
    enc_mask = pb.cache["encoder.0.self_attn.hook_mask"][1, 0]           # (q, k)
    assert torch.equal(enc_mask, torch.tensor(real).expand(len(pieces), -1))
    cross = pb.cache["decoder.0.cross_attn.hook_mask"][1, 0]
    assert torch.equal(cross[0], torch.tensor(real))
    # padding must not change what the real tokens compute: compare with the short text run alone
    alone = hm.run(short)
    n = sum(real)
    a = alone.cache["encoder.1.self_attn.hook_pattern"][0]
    b = pb.cache["encoder.1.self_attn.hook_pattern"][1, :, :n, :n]
    assert torch.allclose(a, b, atol=1e-5)
    # the decoder rows are each text's own greedy ids, as in run()
    T = len(alone.tgt_ids)
    assert pb.tgt_pieces[1][:T] == alone.tgt_pieces


def test_padded_batch_for_a_language_model(tiny_lm):
    pb = capture.padded_batch(tiny_lm, "I am a student.", "The cat sat on the mat and looked at the bird.")
    assert pb.src_pieces is None and pb.padded_row == 0
    mask = pb.cache["decoder.0.self_attn.hook_mask"][0, 0]
    pads = torch.tensor([p == "[pad]" for p in pb.tgt_pieces[0]])
    assert pads.any() and not mask[:, pads].any()
    T = len(pads)
    assert torch.equal(mask[:, ~pads][~pads], torch.tril(torch.ones(T, T, dtype=torch.bool))[~pads][:, ~pads])


def test_positional_tables_formula_and_learned(tiny_translator, tiny_lm):
    t = capture.positional_tables(tiny_translator, 10)
    assert t["learned"] is None
    d = tiny_translator.cfg.d_model
    assert t["sinusoidal"][7, 4] == pytest.approx(math.sin(7 / 10000 ** (4 / d)), abs=1e-6)
    assert t["sinusoidal"][7, 5] == pytest.approx(math.cos(7 / 10000 ** (4 / d)), abs=1e-6)
    lt = capture.positional_tables(tiny_lm, 10)["learned"]
    assert torch.equal(lt, tiny_lm.model.embed.pos.weight[:10].detach())


def test_most_different_picks_the_sentence_that_forces_padding(tiny_translator):
    tok = tiny_translator.tokenizer
    short, long = "好。", "我们明天去北京，他是我的朋友，我喜欢喝茶。"
    assert len(tok.encode(long)) > len(tok.encode(short)) + 3
    assert capture.most_different(tiny_translator, "我爱你。", [short, long]) == long
    assert capture.most_different(tiny_translator, long + long, [short, long]) == short
