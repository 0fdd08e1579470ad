"""Activation patching against independent references: everything patched is A, nothing patched is B
(both run here by plain forwards), and one patched head equals the same patch written by hand."""
from __future__ import annotations

import math

import pytest
import torch

from viz_transformer.run.logit_rules import never_generated
from viz_transformer.run.patching import (Patch, output_logprob, patched_logits, patching_scores, prepare_pair,
                                      resid_names, score_grid)

CANDIDATES = {"encoder_decoder": ["我是学生。", "我爱你。", "这是我的书。", "他是我的朋友。", "我喜欢喝茶。",
                                  "她在学校工作。", "今天天气很好。"],
              "lm": ["I am a student.", "I love you.", "This is my book.", "He is my friend.", "I am an engineer.",
                     "She works at the school."]}
ZH_PAIR = ("我爱你。", "你爱我。")


def aligned(hm) -> tuple[str, str]:
    """Two different texts from the fixtures' sentences with the same number of pieces."""
    texts = CANDIDATES["encoder_decoder" if hm.cfg.is_encoder_decoder else "lm"]
    n = {x: len(hm.tokenizer.encode(x)) for x in texts}
    for a in texts:
        for b in texts:
            if a != b and n[a] == n[b] and hm.tokenizer.encode(a) != hm.tokenizer.encode(b):
                return a, b
    raise AssertionError("no aligned pair among the candidates")


@torch.no_grad()
def plain(hm, src, dec, prefix_len, hooks=()):
    """A plain (optionally hooked) forward on explicit ids: the reference."""
    if hm.cfg.is_encoder_decoder:
        return hm.model.run_with_hooks(torch.tensor([src]), torch.tensor([dec]), fwd_hooks=list(hooks))[0]
    return hm.model.run_with_hooks(torch.tensor([dec]), prefix_len=prefix_len, fwd_hooks=list(hooks))[0]


def _everything(hm) -> list[Patch]:
    """Every position of the first residual stream (a translator's decoder's too, though it is the same)."""
    return [Patch(resid_names(hm.cfg)[0])] + ([Patch(resid_names(hm.cfg, "decoder")[0])]
                                              if hm.cfg.is_encoder_decoder else [])


@pytest.mark.parametrize("name", ["tiny-zh-en", "tiny-lm", "tiny-prefix", "zh-en"])
def test_everything_gives_a_and_nothing_gives_b(models, zh_en, name):
    hm = zh_en if name == "zh-en" else models[name]
    a, b = ZH_PAIR if name == "zh-en" else aligned(hm)
    pair = prepare_pair(hm, a, b, max_new_tokens=8)
    logits_a = plain(hm, pair.src_a, pair.dec_a, pair.prefix_len)
    logits_b = plain(hm, pair.src_b, pair.dec_b, pair.prefix_len)
    assert not torch.allclose(logits_a, logits_b, atol=1e-3)                 # the two inputs do differ
    got = patched_logits(hm, pair, [[], _everything(hm)])
    assert torch.allclose(got[0], logits_b, atol=1e-4)
    assert torch.allclose(got[1], logits_a, atol=1e-4)
    # the last residual stream at every position carries everything as well
    last = [Patch(resid_names(hm.cfg)[-1])]
    assert torch.allclose(patched_logits(hm, pair, [last])[0], logits_a, atol=1e-4)
    # only the rows that score A's output projected (what patching_scores asks for): the same rows of the plain forwards
    a0, a1 = pair.start, pair.start + len(pair.labels)
    rows = patched_logits(hm, pair, [[], _everything(hm)], at=(a0, a1), chunk=1)
    assert rows.shape == (2, a1 - a0, logits_a.shape[-1]) and a1 - a0 < logits_a.shape[0] or hm.cfg.is_encoder_decoder
    assert torch.allclose(rows[0], logits_b[a0:a1], atol=1e-4) and torch.allclose(rows[1], logits_a[a0:a1], atol=1e-4)
    assert torch.allclose(output_logprob(hm, pair, rows, 0), output_logprob(hm, pair, torch.stack([logits_b, logits_a])),
                          atol=1e-4)


@pytest.mark.parametrize("name", ["tiny-zh-en", "tiny-prefix"])
def test_one_head_equals_the_patch_written_by_hand(models, name):
    hm = models[name]
    a, b = aligned(hm)
    pair = prepare_pair(hm, a, b, max_new_tokens=8)
    prefix = "encoder.1.self_attn" if hm.cfg.is_encoder_decoder else "decoder.1.self_attn"
    h, name_z = 2, f"{prefix}.hook_z"
    _, cache = (hm.model.run_with_cache(torch.tensor([pair.src_a]), torch.tensor([pair.dec_a]), names_filter=[name_z])
                if hm.cfg.is_encoder_decoder else
                hm.model.run_with_cache(torch.tensor([pair.dec_a]), prefix_len=pair.prefix_len, names_filter=[name_z]))
    z_a = cache[name_z]                                                        # (1, q, head, d_head)

    def put_head(z, hook):
        z = z.clone()
        z[:, :, h] = z_a[:, :, h]
        return z
    by_hand = plain(hm, pair.src_b, pair.dec_b, pair.prefix_len, [(name_z, put_head)])
    rows = patched_logits(hm, pair, [[Patch(name_z, head=0)], [Patch(name_z, head=h)], []])   # h in batch row 1
    assert torch.allclose(rows[1], by_hand, atol=1e-5)
    assert not torch.allclose(rows[2], by_hand, atol=1e-4)                    # the patch changed something

    df = patching_scores(hm, a, b, "heads", pair=pair)
    row = df[(df["block"] == prefix) & (df["head"] == h)].iloc[0]
    labels = torch.tensor(pair.labels)
    banned = never_generated(hm.tokenizer)
    logp = by_hand[pair.start:pair.start + len(labels)].clone()
    logp[:, banned] = float("-inf")
    expected = float(torch.log_softmax(logp, -1).gather(-1, labels[:, None]).sum())
    assert row["logprob"] == pytest.approx(expected, abs=1e-4)
    lp_a, lp_b = df.attrs["logprob_a"], df.attrs["logprob_b"]
    assert row["score"] == pytest.approx((expected - lp_b) / (lp_a - lp_b), abs=1e-4)


def test_scores_tables_and_grids(zh_en):
    hm = zh_en
    pair = prepare_pair(hm, *ZH_PAIR)
    heads = patching_scores(hm, *ZH_PAIR, "heads", pair=pair)
    assert len(heads) == 72 and set(heads.columns) >= {"block", "layer", "head", "logprob", "score"}
    assert heads.attrs["output_a"] == "I love you." and heads.attrs["output_b"] == "You love me."
    resid = patching_scores(hm, *ZH_PAIR, "resid", pair=pair)
    n_pos = len(pair.src_a)                                # 我 爱 你 。 [end]
    assert len(resid) == (hm.cfg.n_encoder_layers + 1) * n_pos
    grid = score_grid(resid, "resid")
    assert grid.shape == (hm.cfg.n_encoder_layers + 1, n_pos)
    # the same piece (爱, "。", "[end]") patched at the embeddings restores nothing: A's and B's rows are equal
    assert [i for i in range(n_pos) if pair.src_a[i] != pair.src_b[i]] == [0, 2]
    for same in (1, 3, 4):
        assert grid[0, same].item() == pytest.approx(0.0, abs=1e-5)
    assert abs(grid[0, 0].item()) > 0.01 and abs(grid[0, 2].item()) > 0.01     # 我 vs 你 matters, either way
    assert resid["piece"].iloc[0] == "我 / 你"
    blocks = patching_scores(hm, *ZH_PAIR, "blocks", pair=pair)
    assert score_grid(blocks, "blocks").shape == (3, 3)
    g = score_grid(heads, "heads", "decoder.cross_attn")
    assert g.shape == (3, 8) and not math.isnan(g.sum().item())
    assert output_logprob(hm, pair, pair.logits_a).item() == pytest.approx(heads.attrs["logprob_a"])


def test_bad_pairs_and_patches_say_what_is_wrong(models, zh_en):
    a, b = "我喜欢你。", "我们明天去北京开会。"
    n_a, n_b = (len(zh_en.tokenizer.encode(x)) + 1 for x in (a, b))          # + [end]
    assert n_a != n_b
    with pytest.raises(ValueError, match=f"same number of pieces.*{n_a}.*{n_b}"):
        prepare_pair(zh_en, a, b)
    hm = models["tiny-zh-en"]
    pair = prepare_pair(hm, *aligned(hm), max_new_tokens=4)
    with pytest.raises(ValueError, match="unknown capture name"):
        patched_logits(hm, pair, [[Patch("encoder.9.hook_resid_post")]])
    with pytest.raises(ValueError, match="position 99"):
        patched_logits(hm, pair, [[Patch("encoder.0.hook_resid_post", pos=99)]])
    with pytest.raises(ValueError, match="hook_z"):
        patched_logits(hm, pair, [[Patch("encoder.0.hook_resid_post", head=1)]])
    with pytest.raises(ValueError, match="heads, blocks, resid"):
        patching_scores(hm, *aligned(hm), over="neurons")


def test_chunked_batches_give_the_same_rows(models):
    hm = models["tiny-lm"]
    pair = prepare_pair(hm, *aligned(hm), max_new_tokens=4)
    rows = [[]] + [[Patch(resid_names(hm.cfg)[1], pos=q)] for q in range(len(pair.dec_a))]
    assert torch.allclose(patched_logits(hm, pair, rows, chunk=3), patched_logits(hm, pair, rows), atol=1e-5)
