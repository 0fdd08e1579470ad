"""viz_transformer.analysis.patterns against hand computations, PyTorch's own attention and full recomputes."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from viz_transformer import decode, DecodeSettings
from viz_transformer.analysis import attention_maths, decoding_steps, mask_examples, patterns, piece_labels, positions, training_curves
from viz_transformer.run.trace import Beam, Step, Trace


# -- labels and word level -----------------------------------------------------------------------
def test_position_labels_keep_repeated_tokens_distinct():
    labels = piece_labels.position_labels(["▁the", "▁cat", "▁the"])
    assert labels == ["0:▁the", "1:▁cat", "2:▁the"]
    assert len(set(labels)) == 3


def test_aggregate_words_sums_keys_and_averages_queries_by_hand():
    p = torch.tensor([[0.5, 0.3, 0.2],
                      [0.1, 0.6, 0.3],
                      [0.2, 0.2, 0.6]])
    out = patterns.aggregate_words(p, [[0], [1, 2]], [[0], [1, 2]])
    # word 0 row = row 0: [0.5, 0.3 + 0.2]; word 1 row = mean of rows 1, 2: [0.15, (0.9 + 0.8) / 2]
    expected = torch.tensor([[0.5, 0.5], [0.15, 0.85]])
    assert torch.allclose(out, expected)


def test_word_level_groups_pieces_and_rows_still_sum_to_one():
    pieces = ["[begin]", "▁I", "▁eng", "ineer", "。"]
    p = torch.softmax(torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(0)), -1)  # (head, q, k)
    m, ql, kl = patterns.word_level(p, pieces, pieces)
    assert m.shape == (3, 4, 4)
    assert kl == ["[begin]", "I", "engineer", "。"]
    assert torch.allclose(m.sum(-1), torch.ones(3, 4))
    assert torch.allclose(m[:, 2, 2], (p[:, 2, 2] + p[:, 2, 3] + p[:, 3, 2] + p[:, 3, 3]) / 2)


def test_pieces_table_by_hand():
    rows = piece_labels.pieces_table([2, 10, 11, 12], ["[begin]", "▁I", "▁eng", "ineer"])
    assert [r["word"] for r in rows] == [0, 1, 2, 2]
    assert [r["starts"] for r in rows] == [False, True, True, False]
    assert [r["id"] for r in rows] == [2, 10, 11, 12]


def test_reduce_heads_matches_numpy():
    p = torch.rand(4, 3, 5)
    assert np.allclose(patterns.reduce_heads(p, "mean").numpy(), p.numpy().mean(0))
    assert np.allclose(patterns.reduce_heads(p, "max").numpy(), p.numpy().max(0))
    with pytest.raises(ValueError):
        patterns.reduce_heads(p, "median")


# -- downsampling and line view --------------------------------------------------------------------
def test_downsample_keeps_totals_and_max():
    rng = np.random.default_rng(0)
    m = rng.random((512, 300))
    s, rs, cs = patterns.downsample(m, 32, 32, "sum")
    assert s.shape == (32, 32) and np.isclose(s.sum(), m.sum())
    mx, _, _ = patterns.downsample(m, 32, 32, "max")
    assert mx.max() == m.max()
    # block (0, 0) covers rows rs[0]..rs[1]-1 and columns cs[0]..cs[1]-1
    assert mx[0, 0] == m[rs[0]:rs[1], cs[0]:cs[1]].max()
    mean, _, _ = patterns.downsample(np.full((100, 70), 0.25), 8, 8, "mean")
    assert np.allclose(mean, 0.25)


def test_downsample_leaves_small_matrices_alone():
    m = np.arange(12.0).reshape(3, 4)
    out, rs, cs = patterns.downsample(m, 32, 32, "max")
    assert np.array_equal(out, m) and list(rs) == [0, 1, 2] and list(cs) == [0, 1, 2, 3]


def test_line_edges_threshold_and_cap():
    p = np.array([[0.7, 0.2, 0.1], [0.05, 0.9, 0.05], [0.3, 0.3, 0.4]])
    edges = patterns.line_edges(p, min_weight=0.25, max_lines=3)
    assert edges == [(1, 1, pytest.approx(0.9)), (0, 0, pytest.approx(0.7)), (2, 2, pytest.approx(0.4))]
    assert len(patterns.line_edges(p, 0.0, 100)) == 9


def test_max_over_heads_at_word_level_stays_a_weight():
    # two heads; word 0 = pieces 0-1. Head 0 puts 0.5+0.5 on the word, head 1 puts 0.9 on piece 0 only.
    p = torch.tensor([[[0.5, 0.5, 0.0]] * 3, [[0.9, 0.0, 0.1]] * 3])              # (H, q, k)
    pieces = ["▁ab", "c", "▁d"]
    mat, ql, kl = patterns.head_matrix(p, "max", pieces, pieces, words=True)
    assert kl == ["abc", "d"]
    # per head words: head 0 -> [1.0, 0.0], head 1 -> [0.9, 0.1]; max -> [1.0, 0.1]
    assert torch.allclose(mat, torch.tensor([[1.0, 0.1], [1.0, 0.1]]))
    assert float(mat.max()) <= 1.0 + 1e-6
    assert torch.equal(patterns.head_matrix(p, 1, pieces, pieces)[0], p[1])


def test_snap_divisor():
    assert attention_maths.snap_divisor(5.66, 32) == math.sqrt(32)
    assert attention_maths.snap_divisor(5.0, 32) == 5.0


def test_axis_windows_clip_each_axis_on_its_own():
    assert patterns.axis_windows(20, 60, 30, 48) == ((0, 20), (12, 60))
    assert patterns.axis_windows(100, 100, 30, 40) == ((30, 70), (30, 70))


def test_token_window_is_clipped():
    assert patterns.token_window(100, 90, 40) == (60, 100)
    assert patterns.token_window(10, 5, 40) == (0, 10)
    assert patterns.token_window(100, 20, 40) == (20, 60)


# -- one head step by step -----------------------------------------------------------------------
def test_attention_steps_matches_scaled_dot_product_attention():
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(6, 16, generator=g), torch.randn(7, 16, generator=g), torch.randn(7, 16, generator=g)
    mask = torch.rand(6, 7, generator=g) > 0.3
    mask[:, 0] = True                                  # no fully masked row
    hs = attention_maths.attention_steps(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask[None])[0]
    assert torch.allclose(hs.z, ref, atol=1e-5)
    assert torch.allclose(hs.weights.sum(-1), torch.ones(6))
    assert torch.all(hs.weights[~mask] == 0)
    # another divisor is the same as SDPA's explicit scale = 1 / divisor
    hs2 = attention_maths.attention_steps(q, k, v, mask, divisor=1.5)
    ref2 = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask[None], scale=1 / 1.5)[0]
    assert torch.allclose(hs2.z, ref2, atol=1e-5)
    assert torch.allclose(hs2.weights, torch.softmax((q @ k.T / 1.5).masked_fill(~mask, -math.inf), -1))


def test_sdpa_reference_gives_the_weights_and_tells_another_divisor_apart():
    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(5, 8, generator=g), torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    mask = torch.rand(5, 6, generator=g) > 0.4
    mask[:, 0], mask[3] = True, False                  # row 3 fully masked: all zeros, as attention() gives
    weights, z = attention_maths.sdpa_reference(q, k, v, mask)
    by_hand = torch.softmax((q @ k.T / math.sqrt(8)).masked_fill(~mask, -math.inf), -1).nan_to_num(0.0)
    assert torch.allclose(weights, by_hand, atol=1e-6) and torch.all(weights[3] == 0)
    assert torch.allclose(z, by_hand @ v, atol=1e-5)
    assert max(attention_maths.sdpa_difference(attention_maths.attention_steps(q, k, v, mask), q, k, v, mask)) < 1e-5
    assert max(attention_maths.sdpa_difference(attention_maths.attention_steps(q, k, v, mask, 0.5), q, k, v, mask, 0.5)) < 1e-5
    assert attention_maths.sdpa_difference(attention_maths.attention_steps(q, k, v, mask, 0.5), q, k, v, mask)[0] > 0.1


def test_smaller_divisor_sharpens_and_larger_flattens():
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(4, 8, generator=g), torch.randn(9, 8, generator=g), torch.randn(9, 8, generator=g)
    ent = [attention_maths.entropy(attention_maths.attention_steps(q, k, v, None, d).weights[0]) for d in (0.1, 2.83, 1000)]
    assert ent[0] < ent[1] < ent[2]
    assert ent[2] == pytest.approx(math.log(9), abs=1e-3)


def test_head_steps_from_capture_reproduce_the_model(tiny_translator):
    run = tiny_translator.run("我是一名工程师。")
    for block in patterns.available_blocks(tiny_translator.cfg):
        q, k, v, mask = patterns.head_qkv(run.cache, block, 1, 2)
        hs = attention_maths.attention_steps(q, k, v, mask)
        assert torch.allclose(hs.weights, run.cache[patterns.hook_name(block, 1, "hook_pattern")][0, 2], atol=1e-5)
        assert torch.allclose(hs.z, run.cache[patterns.hook_name(block, 1, "hook_z")][0, :, 2], atol=1e-5)
        assert torch.allclose(hs.scaled, run.cache[patterns.hook_name(block, 1, "hook_scores")][0, 2], atol=1e-5)


def test_qk_variance_grows_like_d_k_and_scaling_restores_one():
    var = attention_maths.qk_variance((4, 64, 256), n_samples=6000, seed=0)
    for d, raw, scaled in zip(var["d_k"], var["raw"], var["scaled"]):
        assert raw == pytest.approx(d, rel=0.12)
        assert scaled == pytest.approx(1.0, rel=0.12)


def test_entropy_by_hand():
    assert attention_maths.entropy([1.0, 0.0, 0.0]) == 0.0
    assert attention_maths.entropy([0.25] * 4) == pytest.approx(math.log(4))


# -- blocks and masks ----------------------------------------------------------------------------
def test_blocks_per_architecture(tiny_translator, tiny_lm):
    assert patterns.available_blocks(tiny_translator.cfg) == ["encoder.self_attn", "decoder.self_attn",
                                                              "decoder.cross_attn"]
    assert patterns.available_blocks(tiny_lm.cfg) == ["decoder.self_attn"]
    assert patterns.hook_name("decoder.cross_attn", 1, "hook_pattern") == "decoder.1.cross_attn.hook_pattern"
    run = tiny_translator.run("我爱你。")
    q, k = piece_labels.block_pieces(run, "decoder.cross_attn")
    pats = patterns.block_patterns(run.cache, "decoder.cross_attn")
    assert pats.shape == (2, 4, len(q), len(k))
    assert q == run.tgt_pieces and k == run.src_pieces


def test_example_masks_by_hand():
    m = mask_examples.example_masks(4, 2, ids=[5, 6, 0, 0], pad_id=0)
    assert torch.equal(m["causal"], torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool())
    assert torch.equal(m["prefix_lm"], torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool())
    assert torch.equal(m["padding"], torch.tensor([[1, 1, 0, 0]] * 4).bool())
    s = mask_examples.masked_scores(torch.zeros(4, 4), m["causal"])
    assert torch.isinf(s[0, 1]) and s[1, 0] == 0


# -- positional ----------------------------------------------------------------------------------
def test_sinusoidal_similarity_depends_only_on_distance():
    from viz_transformer.core.positional import sinusoidal_table
    pe = sinusoidal_table(64, 32)
    sim = positions.pe_similarity(pe)
    assert torch.allclose(sim, sim.T)
    assert torch.allclose(torch.diagonal(sim, 5), torch.full((59,), float(sim[0, 5])), atol=1e-4)
    offs = positions.similarity_by_offset(pe, [0, 10, 20], 30)
    assert np.allclose(offs[0], offs[10], atol=1e-6) and np.allclose(offs[0], offs[20], atol=1e-6)
    rand = positions.similarity_by_offset(torch.randn(64, 32), [0, 10], 30)
    assert not np.allclose(rand[0], rand[10])


def test_headline_metrics():
    s = training_curves.training_summary({"task": "t", "val": {"bleu": 5.99, "epoch": 3}, "secret": 1, "test": None})
    assert "secret" not in s and "test" not in s
    assert training_curves.headline_metrics(s) == {"val bleu": "5.99", "val epoch": "3"}


# -- decoding traces -----------------------------------------------------------------------------
def test_step_keys_match_the_recorded_rows(tiny_translator, tiny_lm):
    for hm, text in [(tiny_translator, "我是一名工程师。"), (tiny_lm, "I am a student.")]:
        tr = decode(hm, text, DecodeSettings(max_new_tokens=5))
        for t, s in enumerate(tr.steps):
            assert s.attention["decoder.0.self_attn.hook_pattern"].shape[-1] == len(decoding_steps.step_keys(tr, t))
        assert decoding_steps.step_query(tr, 0) == tr.prompt_pieces[-1]


def _beam(tokens, finished=False):
    return Beam(tokens, [f"p{x}" for x in tokens], -float(len(tokens)), 0, finished)


def test_beam_links_by_hand():
    # step 0: beams [1], [2]; step 1: [1, 3] (from [1]), [2, 4] finished (from [2]), [1, 5] (from [1])
    # step 2: [1, 3, 6] (from [1, 3]) — so [1, 5] is dropped
    steps = [[_beam([1]), _beam([2])], [_beam([1, 3]), _beam([2, 4], True), _beam([1, 5])], [_beam([1, 3, 6])]]
    tr = Trace("beam", None, ["[begin]"], [Step(i, 0, "x", 1.0, [], {}, b) for i, b in enumerate(steps)])
    links = decoding_steps.beam_links(tr)
    assert [b["parent"] for b in links[1]] == [0, 1, 0]
    assert [b["parent"] for b in links[2]] == [0]
    assert [b["survives"] for b in links[0]] == [True, True]
    assert [b["survives"] for b in links[1]] == [True, False, False]
    assert len(decoding_steps.beam_links(tr, upto=2)) == 2
    assert not any(b["best"] for row in links for b in row)         # output ids [0, 0, 0] match no beam


def test_beam_links_on_a_real_beam_search(tiny_translator):
    tr = decode(tiny_translator, "我是一名工程师。", DecodeSettings("beam", beam_width=3, max_new_tokens=6))
    links = decoding_steps.beam_links(tr)
    # walking the parent links back from the chosen beam spells the output, one token per step
    t = len(links) - 1
    j = next(i for i, b in enumerate(links[t]) if b["best"] and b["tokens"] == tr.output_ids[: t + 1])
    spelled = []
    while t >= 0:
        spelled.append(links[t][j]["tokens"][-1])
        j, t = links[t][j]["parent"], t - 1
    assert spelled[::-1] == tr.output_ids[: len(links)] and j == -1
    # the links agree with the parents the search itself recorded while it ran (Beam.parent)
    for t, step in enumerate(tr.steps[: len(links)]):
        assert [b["parent"] for b in links[t]] == [b.parent for b in step.beams]
    # a beam is drawn as extended exactly when the next step has a child of it
    for t in range(len(links) - 1):
        children = {b["parent"] for b in links[t + 1]}
        assert [b["survives"] for b in links[t]] == [i in children for i in range(len(links[t]))]




# -- a decoder row says what it predicts ---------------------------------------------------------
def _recomputed_predictions(hm, run) -> list[str]:
    """Independent of the run's logits: the model forward on the teacher-forced ids, argmax of each row
    with the never-generated ids excluded (as decoding does)."""
    from viz_transformer.run.logit_rules import never_generated
    with torch.no_grad():
        if hm.cfg.is_encoder_decoder:
            logits = hm.model(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]))[0]
        else:
            logits = hm.model(torch.tensor([run.tgt_ids]), prefix_len=run.prefix_len)[0]
    logits[:, never_generated(hm.tokenizer)] = float("-inf")
    return hm.tokenizer.pieces(logits.argmax(-1).tolist())


@pytest.mark.parametrize("name", ["tiny_translator", "tiny_lm"])
def test_a_decoder_row_is_labelled_with_its_input_and_the_token_it_predicts(name, request):
    hm = request.getfixturevalue(name)
    run = hm.run("我是学生。" if name == "tiny_translator" else "The cat sat on the mat.", max_new_tokens=8)
    predicted = _recomputed_predictions(hm, run)
    assert run.predicted == predicted
    for block in patterns.available_blocks(hm.cfg):
        labels = piece_labels.query_labels(run, block)
        if block == "encoder.self_attn":
            assert labels == run.src_pieces                                  # encoder rows stay plain
        else:
            assert labels == [f"{p} → {n}" for p, n in zip(run.tgt_pieces, predicted)]
    # the greedy part: row i predicts the next input, which is what greedy decoding chose there
    for i in range(run.prompt_len - 1, len(run.tgt_pieces) - 1):
        assert run.predicted[i] == run.tgt_pieces[i + 1]
    trace = decode(hm, run.text, DecodeSettings(strategy="greedy", max_new_tokens=8))
    rows = piece_labels.query_labels(run, "decoder.self_attn")
    assert [decoding_steps.step_label(trace, t) for t in range(len(trace.steps) - 1)] == \
        rows[run.prompt_len - 1: run.prompt_len - 1 + len(trace.steps) - 1]


def test_the_shipped_translator_labels_the_row_that_chooses_engineer(zh_en):
    run = zh_en.run("我是一名工程师。")
    assert run.predicted == _recomputed_predictions(zh_en, run)
    rows = piece_labels.query_labels(run, "decoder.cross_attn")
    assert run.tgt_pieces == ["[begin]", "▁I", "'", "m", "▁an", "▁engineer", "."]
    assert rows[4] == "▁an → ▁engineer" and rows[-1] == ". → [end]"
    assert piece_labels.example_row(run.tgt_pieces, run.predicted, run.prompt_len - 1) == ("▁an → ▁engineer", "▁engineer")
    words = piece_labels.query_labels(run, "decoder.self_attn", words=True)     # a word's row: its last piece's
    assert len(words) == len(patterns.group_words(run.tgt_pieces)) and "an → ▁engineer" in words


def test_row_labels_by_hand():
    assert piece_labels.row_labels(["[begin]", "▁a", "b"], ["▁a", "b", "[end]"]) == ["[begin] → ▁a", "▁a → b", "b → [end]"]
    assert piece_labels.row_labels(["[begin]", "▁a", "b"], None) == ["[begin]", "▁a", "b"]
    assert piece_labels.row_labels(["[begin]", "▁a", "b"], ["x", "y", "z"], words=True) == ["[begin] → x", "ab → z"]
    assert piece_labels.next_pieces(["[begin]", "▁a", "b"]) == ["▁a", "b", "[end]"]
