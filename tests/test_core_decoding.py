"""Step-by-step decoding against one teacher-forced forward over the final output: tokens,
probabilities, attention rows, beam scores; sampling rules; batched greedy translation."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from viz_transformer import load_checkpoint
from viz_transformer.run.capture import HookedModel
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode, greedy_batch

TEXT = "我是学生。"
N = 8          # new tokens per trace: random weights rarely say [end]


@pytest.fixture(scope="module")
def models(ckpt_root, tiny_translator, tiny_lm):
    return {"encoder_decoder": tiny_translator, "decoder_only": tiny_lm,
            "prefix_lm": load_checkpoint(ckpt_root / "tiny-prefix")}


def teacher_forced(hm, text, out_ids):
    """One forward over [begin] (+ text for an LM) + out_ids[:-1]: (logits rows that predicted
    out_ids [n, V], Cache, index of the first such row)."""
    cfg, tok = hm.cfg, hm.tokenizer
    if cfg.is_encoder_decoder:
        src = torch.tensor([tok.encode(text) + [cfg.eos_id]])
        logits, cache = hm.model.run_with_cache(src, torch.tensor([[cfg.bos_id] + out_ids[:-1]]))
        start = 0
    else:
        prompt = [cfg.bos_id] + tok.encode(text)
        P = len(prompt) if cfg.architecture == "prefix_lm" else None
        logits, cache = hm.model.run_with_cache(torch.tensor([prompt + out_ids[:-1]]), prefix_len=P)
        start = len(prompt) - 1
    logits = logits[0, start:].clone()
    logits[:, [tok.pad_id, tok.unk_id, tok.bos_id]] = float("-inf")     # never generated
    return logits, cache, start


def attention_names(cfg):
    names = [f"decoder.{i}.self_attn.hook_pattern" for i in range(cfg.n_decoder_layers)]
    if cfg.is_encoder_decoder:
        names += [f"decoder.{i}.cross_attn.hook_pattern" for i in range(cfg.n_decoder_layers)]
    return names


def check_against_teacher_forcing(hm, text, trace):
    ids = trace.output_ids
    logits, cache, start = teacher_forced(hm, text, ids)
    probs = torch.softmax(logits, -1)
    if trace.strategy == "greedy":
        assert ids == logits.argmax(-1).tolist()                          # token for token
    for t, step in enumerate(trace.steps):
        assert step.piece == hm.tokenizer.piece(step.token_id)
        if trace.strategy != "sample":
            assert step.prob == pytest.approx(float(probs[t, step.token_id]), abs=1e-5)
    for name in attention_names(hm.cfg):                                  # pattern for pattern
        full = cache[name][0, :, start:]                                  # (head, step, key)
        got = trace.pattern(name)
        assert got.shape == full.shape, name
        torch.testing.assert_close(got, full, atol=1e-5, rtol=1e-5, msg=name)
    return logits


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_greedy_trace_equals_full_recompute(models, architecture):
    hm = models[architecture]
    trace = decode(hm, TEXT, DecodeSettings("greedy", max_new_tokens=N))
    assert 1 <= len(trace.steps) <= N
    logits = check_against_teacher_forcing(hm, TEXT, trace)
    for t, step in enumerate(trace.steps):
        top = torch.softmax(logits[t], -1).topk(5)
        assert [c.id for c in step.candidates] == top.indices.tolist()
        assert [c.prob for c in step.candidates] == pytest.approx(top.values.tolist(), abs=1e-5)
    prompt = [hm.cfg.bos_id] + ([] if hm.cfg.is_encoder_decoder else hm.tokenizer.encode(TEXT))
    assert trace.pieces == hm.tokenizer.pieces(prompt) + [s.piece for s in trace.steps]
    if hm.cfg.is_encoder_decoder:
        assert trace.src_pieces == hm.tokenizer.pieces(hm.tokenizer.encode(TEXT) + [hm.cfg.eos_id])


def reference_greedy(hm, text, n):
    """An independent greedy loop: a full forward over everything so far at every step (no KV
    cache), the three never-generated ids at -inf, argmax, stop after [end]."""
    cfg, tok = hm.cfg, hm.tokenizer
    banned = [tok.pad_id, tok.unk_id, tok.bos_id]
    out = []
    with torch.no_grad():
        for _ in range(n):
            if cfg.is_encoder_decoder:
                logits = hm.model(torch.tensor([tok.encode(text) + [cfg.eos_id]]), torch.tensor([[cfg.bos_id] + out]))
            else:
                prompt = [cfg.bos_id] + tok.encode(text)
                P = len(prompt) if cfg.architecture == "prefix_lm" else None
                logits = hm.model(torch.tensor([prompt + out]), prefix_len=P)
            last = logits[0, -1].clone()
            last[banned] = float("-inf")
            out.append(int(last.argmax()))
            if out[-1] == cfg.eos_id:
                break
    return out


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_greedy_trace_and_fast_greedy_equal_an_independent_loop(models, architecture):
    hm = models[architecture]
    for text in (TEXT, "The cat sat on the mat."):
        ref = reference_greedy(hm, text, N)
        assert decode(hm, text, DecodeSettings("greedy", max_new_tokens=N)).output_ids == ref
        fast = greedy_batch(hm.model, hm.tokenizer, [text], max_new_tokens=N)[0]
        assert fast == hm.tokenizer.decode([i for i in ref if i != hm.cfg.eos_id])


def test_batched_greedy_with_source_padding_equals_one_at_a_time(tiny_translator):
    texts = ["我爱你。", "今天天气很好。你叫什么名字？", "我是学生。"]
    batch = greedy_batch(tiny_translator.model, tiny_translator.tokenizer, texts, max_new_tokens=N)
    assert batch == [greedy_batch(tiny_translator.model, tiny_translator.tokenizer, [t], max_new_tokens=N)[0]
                     for t in texts]


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_beam_width_one_equals_greedy(models, architecture):
    hm = models[architecture]
    greedy = decode(hm, TEXT, DecodeSettings("greedy", max_new_tokens=N))
    beam = decode(hm, TEXT, DecodeSettings("beam", max_new_tokens=N, beam_width=1))
    assert beam.output_ids == greedy.output_ids


def seq_logprob(hm, text, tokens) -> float:
    logits, _, _ = teacher_forced(hm, text, tokens)
    logp = torch.log_softmax(logits.double(), -1)
    return float(logp[torch.arange(len(tokens)), torch.tensor(tokens)].sum())


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only"])
def test_beam_scores_equal_teacher_forced_log_probs(models, architecture):
    hm = models[architecture]
    trace = decode(hm, TEXT, DecodeSettings("beam", max_new_tokens=6, beam_width=3))
    check_against_teacher_forcing(hm, TEXT, trace)                       # rows follow the best beam
    best = [b for b in trace.steps[-1].beams if b.tokens == trace.output_ids]
    assert len(best) == 1
    assert best[0].score == pytest.approx(seq_logprob(hm, TEXT, trace.output_ids), abs=1e-4)
    for step in trace.steps:                                             # every beam at every step
        assert 1 <= len(step.beams) <= 6
        for b in step.beams:
            assert len(b.tokens) == step.index + 1
            assert b.score == pytest.approx(seq_logprob(hm, TEXT, b.tokens), abs=1e-4)
        scores = [b.score for b in step.beams if not b.finished]
        assert scores == sorted(scores, reverse=True)


def with_eos_bias(hm, bias: float) -> HookedModel:
    """A copy whose output layer favours [end], so beams finish at different steps."""
    model = copy.deepcopy(hm.model)
    head = torch.nn.Linear(model.cfg.d_model, model.cfg.vocab_size)
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[model.cfg.eos_id] = bias
    model.lm_head = head
    return HookedModel(model, hm.tokenizer)


def test_beam_parents_point_into_the_previous_step(tiny_translator):
    """parent = index in the previous step's beam list (which also shows finished beams), -1 at start."""
    seen_finished_before_last = False
    for bias in (2.4, 2.6, 2.8, 3.0):
        hm = with_eos_bias(tiny_translator, bias)
        for text in ("我是学生。", "I love you.", "今天天气很好。"):
            trace = decode(hm, text, DecodeSettings("beam", max_new_tokens=N, beam_width=3, length_penalty=2.0))
            for t, step in enumerate(trace.steps):
                for b in step.beams:
                    if t == 0:
                        assert b.parent == -1
                        continue
                    prev = trace.steps[t - 1].beams[b.parent]
                    assert not prev.finished and prev.tokens == b.tokens[:-1]
                    assert b.finished == (b.tokens[-1] == hm.cfg.eos_id)
                if t < len(trace.steps) - 1 and any(b.finished for b in step.beams):
                    seen_finished_before_last = True
            if trace.output_ids[-1] == hm.cfg.eos_id:
                assert trace.steps[-1].beams and seq_logprob(hm, text, trace.output_ids) == pytest.approx(
                    next(b.score for b in trace.steps[-1].beams if b.tokens == trace.output_ids), abs=1e-4)
    assert seen_finished_before_last          # the case above was exercised


# -- sampling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only"])
def test_sampling_is_reproducible_and_top_k_1_is_greedy(models, architecture):
    hm = models[architecture]
    a = decode(hm, TEXT, DecodeSettings("sample", max_new_tokens=N, seed=7, temperature=1.5))
    b = decode(hm, TEXT, DecodeSettings("sample", max_new_tokens=N, seed=7, temperature=1.5))
    c = decode(hm, TEXT, DecodeSettings("sample", max_new_tokens=N, seed=8, temperature=1.5))
    assert a.output_ids == b.output_ids and [s.prob for s in a.steps] == [s.prob for s in b.steps]
    assert a.output_ids != c.output_ids
    check_against_teacher_forcing(hm, TEXT, a)
    greedy = decode(hm, TEXT, DecodeSettings("greedy", max_new_tokens=N)).output_ids
    assert decode(hm, TEXT, DecodeSettings("sample", max_new_tokens=N, seed=3, top_k=1)).output_ids == greedy
    assert decode(hm, TEXT, DecodeSettings("sample", max_new_tokens=N, seed=3, top_p=1e-6)).output_ids == greedy


def test_top_k_and_top_p_restrict_the_choice(tiny_translator):
    hm = tiny_translator
    for kw in (dict(top_k=3, temperature=0.7), dict(top_p=0.2, temperature=2.0)):
        for seed in range(3):
            trace = decode(hm, TEXT, DecodeSettings("sample", max_new_tokens=6, seed=seed, **kw))
            logits, _, _ = teacher_forced(hm, TEXT, trace.output_ids)
            for t, step in enumerate(trace.steps):
                p = torch.softmax(logits[t].double() / kw["temperature"], -1)
                order = p.argsort(descending=True).tolist()
                if "top_k" in kw:
                    keep = order[: kw["top_k"]]
                else:                               # the smallest set of likeliest tokens reaching top_p
                    keep, mass = [], 0.0
                    for i in order:
                        keep.append(i)
                        mass += float(p[i])
                        if mass >= kw["top_p"]:
                            break
                assert step.token_id in keep
                ref = p[keep] / p[keep].sum()
                assert step.prob == pytest.approx(float(ref[keep.index(step.token_id)]), abs=1e-4)
                if len(keep) <= 5:                  # the candidates shown are exactly the kept tokens
                    assert sorted(c.id for c in step.candidates) == sorted(keep)


def test_decode_rejects_bad_input(tiny_translator):
    with pytest.raises(ValueError, match="strategy"):
        decode(tiny_translator, TEXT, DecodeSettings("viterbi"))
    with pytest.raises(ValueError, match="empty"):
        decode(tiny_translator, "   ")


def test_long_input_is_cut_to_max_len(tiny_translator):
    hm = tiny_translator
    text = "我是学生。" * 40
    trace = decode(hm, text, DecodeSettings("greedy", max_new_tokens=2))
    assert len(trace.src_pieces) == hm.cfg.max_len
    assert trace.n_cut == len(hm.tokenizer.encode(text)) - (hm.cfg.max_len - 1) > 0


# -- beam search against exhaustive search ---------------------------------------------------------
class FourTokens:
    """A stand-in tokenizer: ids 0 [pad], 1 [unk], 2 [begin], 3 [end], then 4, 5, 6."""
    pad_id, unk_id, bos_id, eos_id, vocab_size = 0, 1, 2, 3, 7

    def encode(self, text):
        return [4 + (ord(c) % 3) for c in text]

    def piece(self, i):
        return f"t{int(i)}"

    def pieces(self, ids):
        return [self.piece(i) for i in ids]


def tiny_model(architecture, seed):
    from viz_transformer.core.config import ModelConfig
    from viz_transformer.core.model import Transformer
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=7, d_model=16, n_heads=2, n_encoder_layers=1 if architecture == "encoder_decoder" else 0,
                      n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=16, architecture=architecture,
                      tie_embeddings=False)
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 0.6)      # varied distributions: [end] wins for some seeds
    return model


def exhaustive_best(model, text, L, length_penalty):
    """Every hypothesis of at most L tokens over {4, 5, 6, [end]} ([end] only last; unfinished ones only
    at length L, where the limit stops them), scored by a full forward: the best by score / len^lp."""
    import itertools
    tok, cfg = FourTokens(), model.cfg
    hyps = [list(p) + [3] for n in range(L) for p in itertools.product([4, 5, 6], repeat=n)]
    hyps += [list(p) for p in itertools.product([4, 5, 6], repeat=L)]
    best, best_norm = None, -float("inf")
    with torch.no_grad():
        for h in hyps:
            if cfg.is_encoder_decoder:
                logits = model(torch.tensor([tok.encode(text) + [3]]), torch.tensor([[2] + h[:-1]]))[0]
            else:
                logits = model(torch.tensor([[2] + tok.encode(text) + h[:-1]]))[0, -len(h):]
            logits[:, [0, 1, 2]] = float("-inf")
            score = float(torch.log_softmax(logits.double(), -1)[torch.arange(len(h)), torch.tensor(h)].sum())
            norm = score / len(h) ** length_penalty
            if norm > best_norm:
                best, best_norm = (h, score), norm
    return best


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only"])
@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
def test_wide_beam_finds_the_exhaustive_optimum(architecture, length_penalty):
    from types import SimpleNamespace
    found_end = 0
    for seed in range(4):
        model = tiny_model(architecture, seed)
        hm = SimpleNamespace(model=model, tokenizer=FourTokens())
        for text in ("ab", "cab"):
            tr = decode(hm, text, DecodeSettings("beam", max_new_tokens=3, beam_width=16,
                                                 length_penalty=length_penalty))
            ids, score = exhaustive_best(model, text, 3, length_penalty)
            assert tr.output_ids == ids
            beam = [b for b in tr.beam_history[len(ids) - 1] if b.tokens == ids]
            assert beam and beam[0].score == pytest.approx(score, abs=1e-4)
            found_end += ids[-1] == 3
    assert found_end                      # finished and unfinished winners were both exercised


def test_beam_stops_once_width_hypotheses_have_finished(tiny_translator):
    """Documented rule (as Hugging Face's early_stopping=True): the search ends at the step where
    the width-th hypothesis ends with [end], even when max_new_tokens would allow more."""
    stopped_early = 0
    for bias in (2.6, 3.0, 3.4, 3.8):
        hm = with_eos_bias(tiny_translator, bias)
        tr = decode(hm, "我是学生。", DecodeSettings("beam", max_new_tokens=N, beam_width=2, length_penalty=0.0))
        finished = [sum(b.finished for b in step) for step in tr.beam_history]
        if sum(finished) >= 2:
            assert sum(finished[:-1]) < 2          # it stopped at the step where the second one finished
            stopped_early += len(tr.beam_history) < N
        else:
            assert len(tr.beam_history) == N       # otherwise only the length limit stops it
    assert stopped_early


@pytest.mark.parametrize("architecture", ["encoder_decoder", "decoder_only", "prefix_lm"])
def test_greedy_read_off_the_runs_trace_equals_decoding_again(models, architecture):
    """decode(known=run.trace) serves a shorter greedy call from the run's own continuation: every step (token,
    probability, candidates, attention rows) equals a fresh decode of that length."""
    hm = models[architecture]
    known = hm.run(TEXT).trace
    for n in (1, 3, len(known.steps)):
        s = DecodeSettings(max_new_tokens=n)
        fresh, read = decode(hm, TEXT, s), decode(hm, TEXT, s, known=known)
        assert read.output_ids == fresh.output_ids and read.pieces == fresh.pieces
        for a, b in zip(read.steps, fresh.steps):
            assert a.prob == pytest.approx(b.prob, abs=1e-6)
            assert [c.id for c in a.candidates] == [c.id for c in b.candidates]
            assert a.attention.keys() == b.attention.keys()
            for name in a.attention:
                torch.testing.assert_close(a.attention[name], b.attention[name], atol=1e-6, rtol=0)


def test_greedy_prefix_refuses_what_it_cannot_read_off(tiny_lm):
    from viz_transformer.core.encoding import encode_input
    from viz_transformer.run.decoding import greedy_prefix
    hm = tiny_lm
    short = decode(hm, TEXT, DecodeSettings(max_new_tokens=2))
    inp = encode_input(hm.tokenizer, hm.cfg, TEXT, reserve=5)
    ended = short.steps[-1].token_id == hm.cfg.eos_id
    assert (greedy_prefix(short, hm.cfg, inp, 5) is None) == (not ended)              # too few steps
    other = encode_input(hm.tokenizer, hm.cfg, "我爱你。", reserve=2)
    assert greedy_prefix(short, hm.cfg, other, 2) is None                               # another prompt
    assert greedy_prefix(decode(hm, TEXT, DecodeSettings("beam", max_new_tokens=2)), hm.cfg, inp, 2) is None
    assert greedy_prefix(short, dataclasses.replace(hm.cfg, forced_eos=True), inp, 2) is None
    assert greedy_prefix(short, hm.cfg, inp, 1).output_ids == short.output_ids[:1]
