"""One attention score split into query part × key part terms (analysis.score_terms): the parts add up to the
residual stream the block captured (token, position, segment, every earlier head and MLP, the biases; each norm's
scale frozen), and the terms add up to the score the model computed, on every shipped model and on tiny Hugging Face
folders of GPT-2, Llama (RoPE, RMSNorm, grouped-query), Qwen2, BERT and T5 (relative position bias)."""
from __future__ import annotations

import random

import pytest
import torch

import hf_bert_util as HB
import hf_t5_util as HT
import hf_util as H
from app_util import ROOT
from viz_transformer import load_checkpoint
from viz_transformer.analysis import claims
from viz_transformer.analysis.score_terms import logit_terms, score_terms, stream_parts
from viz_transformer.core.hook_names import available_blocks

SHIPPED = {"zh-en-postnorm": "我是一名工程师。", "zh-en": "我是一名工程师。", "zh-en-decoder": "我喜欢你。",
           "zh-en-prefix": "我喜欢你。", "en-stories": "Once upon a time there was a dog.", "zh-en-bert": "我是一名工[MASK]师。"}


def cells(hm, run, n: int, seed: str):
    """n (block, layer, head, query, key) drawn by a seeded generator among the cells the mask lets through."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        block = rng.choice(available_blocks(hm.cfg))
        stack, site = block.split(".")
        layer = rng.randrange(hm.cfg.n_encoder_layers if stack == "encoder" else hm.cfg.n_decoder_layers)
        mask = run.cache[f"{stack}.{layer}.{site}.hook_mask"][0, 0]
        q, k = rng.choice(mask.nonzero().tolist())
        out.append((block, layer, rng.randrange(hm.cfg.n_heads), q, k))
    return out


def check(hm, run, n: int, seed: str) -> None:
    for block, layer, head, q, k in cells(hm, run, n, seed):
        t = score_terms(hm, run, block, layer, head, q, k)
        assert t.total() == pytest.approx(t.score, rel=1e-4, abs=1e-4), (block, layer, head, q, k)
        assert t.matrix.shape == (len(t.query_parts), len(t.key_parts)) and "bias" in t.query_parts
        stack, site = block.split(".")
        parts = stream_parts(hm, run, stack, layer, site)                # the stream the block read, rebuilt
        captured = run.cache[f"{stack}.{layer}.hook_resid_{'pre' if site == 'self_attn' else 'mid'}"][0].double()
        torch.testing.assert_close(sum(parts.values()), captured, atol=2e-4, rtol=1e-4)


def check_logits(hm, run) -> None:
    """Every output step's logit, and the runner-up's, is the sum of its parts' direct contributions; the final
    stream's parts add up to what the unembedding read (the logits recomputed from their sum)."""
    for step in range(1, len(run.output_ids) + 1):
        t = logit_terms(hm, run, step)
        assert t.total() == pytest.approx(t.logit, rel=1e-4, abs=1e-4), step
        assert t.token == run.output_ids[step - 1]
        other = int(run.logits[t.row].topk(2).indices[1])
        u = logit_terms(hm, run, step, token=other)                      # why this piece and not the runner-up
        assert u.total() == pytest.approx(float(run.logits[t.row, other]), rel=1e-4, abs=1e-4)
        assert t.parts == u.parts


@pytest.mark.parametrize("name", list(SHIPPED))
def test_every_shipped_model_s_scores_are_the_sum_of_their_terms(name):
    hm = load_checkpoint(ROOT / "checkpoints" / name)
    run = hm.run(SHIPPED[name])
    check(hm, run, 12, name)
    if hm.cfg.is_encoder_only:
        with pytest.raises(ValueError, match="not linear"):
            logit_terms(hm, run, 1)
    else:
        check_logits(hm, run)


def test_the_parts_are_named_for_what_they_are():
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en-postnorm")
    run = hm.run("我是一名工程师。")
    t = score_terms(hm, run, "decoder.cross_attn", 1, 6, 4, 5)
    assert t.query_parts[:2] == ["dec.token", "dec.position"]
    assert {"dec.L0.H0", "dec.L0.X7", "dec.L0.mlp", "dec.L1.H7"} <= set(t.query_parts)
    assert "dec.L1.X0" not in t.query_parts                               # the block's own heads come after it
    assert {"enc.token", "enc.position", "enc.L2.H7", "enc.L2.mlp"} <= set(t.key_parts)
    assert not any(p.startswith("dec.") for p in t.key_parts)            # the keys are the encoder's output
    lm = load_checkpoint(ROOT / "checkpoints" / "en-stories")
    t = score_terms(lm, lm.run("Once upon a time"), "decoder.self_attn", 1, 0, 3, 1)
    assert t.query_parts == ["token", "position"] + [f"L0.H{h}" for h in range(8)] + ["L0.mlp", "bias"]
    with pytest.raises(ValueError, match="no \\(0, 500, 1\\)"):
        score_terms(lm, lm.run("Once upon a time"), "decoder.self_attn", 1, 0, 500, 1)


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["gpt2-5heads-untied-gelu", "llama-gqa2-llama3-bias", "qwen2-3heads-gqa1-bias"])
def test_hugging_face_decoders(tmp_path, shape):
    hm = load_checkpoint(H.build(H.SHAPE_BY_ID[shape], tmp_path / shape))
    run = hm.run("The cat sat on the mat and looked at the dog.")
    check(hm, run, 10, shape)
    check_logits(hm, run)


@pytest.mark.slow
def test_a_bert_folder_with_segments(tmp_path):
    shape = next(s for s in HB.SHAPES if s.id == "bert-mlm")
    hm = load_checkpoint(HB.build(shape, tmp_path / "bert"))
    check(hm, hm.run("the cat sat [SEP] on the mat"), 10, "bert")


@pytest.mark.slow
def test_a_t5_folder_with_its_relative_bias(tmp_path):
    hm = load_checkpoint(HT.build_t5(HT.T5_BY_ID["t5-v1.0-relu-tied"], tmp_path / "t5"))
    run = hm.run("the cat sat on the mat")
    check(hm, run, 10, "t5")
    check_logits(hm, run)                                                 # a tied T5 scales its last stream
    t = score_terms(hm, run, "encoder.self_attn", 1, 0, 2, 4)
    assert set(t.extra) == {"relative position"}
    assert t.extra["relative position"] == pytest.approx(float(run.cache["encoder.0.self_attn.hook_bias"][0, 0, 2, 4]))


def test_the_docs_worked_example_is_what_score_terms_gives():
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en-postnorm")
    run = hm.run("我是一名工程师。")
    t = score_terms(hm, run, "decoder.cross_attn", 1, 6, query=4, key=6)
    assert run.src_pieces[6] == "师" and run.tgt_pieces[4] == "▁an"
    row = run.cache["decoder.1.cross_attn.hook_pattern"][0, 6, 4]
    assert int(row.argmax()) == 6
    top_k = sorted(t.by_key_part().items(), key=lambda x: -abs(x[1]))[:3]
    top_q = sorted(t.by_query_part().items(), key=lambda x: -abs(x[1]))[:3]
    for path in (ROOT / "docs" / "library.md", ROOT / "docs" / "zh-CN" / "library.md"):
        text = path.read_text(encoding="utf-8")
        assert f"# {t.score:.3f}, {t.total():.3f}" in text and f"{float(row.max()):.2f}" in text
        assert ", ".join(f"{n} {v:.3f}" for n, v in top_k) in text
        assert ", ".join(f"{n} {v:.3f}".replace("-", "−") for n, v in top_q) in text


def test_why_key_answers_from_the_terms_and_the_reveal_shows_them(monkeypatch):
    """The seq2seq lesson's question: the key's parts, grouped, add up to its score (less T5's bias, none here),
    the answer is the largest group, and a student's reveal draws the groups with that one outlined."""
    from streamlit.testing.v1 import AppTest
    from app_util import APP, by_key, figures, page_file, texts
    from viz_explorer.lessons import lesson_file
    from viz_transformer.analysis import questions
    hm = load_checkpoint(ROOT / "checkpoints" / "zh-en-postnorm")
    lesson = lesson_file.load_lesson("seq2seq-cross-attention")
    i = next(i for i, s in enumerate(lesson.steps) if s.question.get("kind") == "why_key")
    q = questions.ask("why_key", hm, "我是一名工程师。", {"block": "decoder.cross_attn", "layer": 1, "head": 5, "row": 0})
    t = score_terms(hm, hm.run("我是一名工程师。"), "decoder.cross_attn", 1, 5, 0, q.evidence["key_index"])
    assert sum(q.evidence["groups"].values()) == pytest.approx(t.score, abs=1e-4)
    assert q.options[q.answer] == max(q.evidence["groups"], key=q.evidence["groups"].get)
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lesson"] = "seq2seq-cross-attention"
    at.query_params["step"] = str(i + 1)
    at.run()
    at.switch_page(page_file(lesson.steps[i].page)).run()    # AppTest follows st.switch_page's page, not its address
    assert not at.exception, [e.value for e in at.exception]
    qid = f"seq2seq-cross-attention/{i + 1}"
    by_key(at.button_group, f"qz_pick_{qid}").set_value("position").run()
    by_key(at.button, f"qz_reveal_{qid}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    bars = [f for f in figures(at) if f["data"] and f["data"][0].get("type") == "bar"]
    assert bars and [round(v, 6) for v in bars[-1]["data"][0]["y"]] == [round(q.evidence["groups"][g], 6)
                                                                          for g in questions.SOURCES]
    assert f"{t.score:.2f}" in texts(at)


@pytest.mark.parametrize("norm, arch, block", [("pre", "decoder_only", "decoder.self_attn"),
                                               ("post", "encoder_decoder", "encoder.self_attn"),
                                               ("pre", "encoder_decoder", "decoder.cross_attn")])
def test_head_circuits_equal_a_loop_over_positions_and_tokens(tmp_path, norm, arch, block):
    from conftest import make_tiny_checkpoint
    from viz_transformer.analysis.score_terms import head_circuits
    hm = load_checkpoint(make_tiny_checkpoint(tmp_path / "m", arch, seed=4, norm=norm, positional="learned",
                                              scale_embeddings=False))
    cfg, model = hm.cfg, hm.model
    stack, site = block.split(".")
    blk = (model.encoder if stack == "encoder" else model.decoder)[1]
    attn = getattr(blk, site)
    q_embed = model.enc_embed if stack == "encoder" else model.dec_embed
    k_embed = model.enc_embed if site == "cross_attn" else q_embed        # a cross-attention reads the encoder
    c = head_circuits(hm, 1, 2, block, n_positions=6, n_tokens=40, chunk=7)
    d = cfg.d_head
    W_Q, W_K = (m.weight.detach().double()[2 * d:3 * d] for m in (attn.W_Q, attn.W_K))
    b_Q, b_K = (m.bias.detach().double()[2 * d:3 * d] for m in (attn.W_Q, attn.W_K))

    def layer_norm(ln, x):                           # a LayerNorm on one vector, by hand
        return (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + ln.eps) * ln.weight.detach().double() + \
            ln.bias.detach().double()

    def query_side(x):                               # pre-norm: the block's own norm before the head
        return x if norm == "post" else layer_norm(blk.ln_cross if site == "cross_attn" else blk.ln1, x)

    def key_side(x):                                 # a cross-attention's keys: the encoder's final norm
        return layer_norm(model.encoder_norm, x) if site == "cross_attn" else query_side(x)
    q_rows = [q_embed.pos(6, 0).detach().double()[i] for i in range(6)]
    k_rows = [k_embed.pos(6, 0).detach().double()[i] for i in range(6)]
    for i in range(6):
        for j in range(6):
            q = W_Q @ query_side(q_rows[i]) + b_Q
            k = W_K @ key_side(k_rows[j]) + b_K
            assert float(c.positions[i, j]) == pytest.approx(float(q @ k) / d ** 0.5, rel=1e-9, abs=1e-9)
    W_V = attn.W_V.weight.detach().double()[2 * d:3 * d]
    b_V = attn.W_V.bias.detach().double()[2 * d:3 * d]
    W_O = attn.W_O.weight.detach().double()[:, 2 * d:3 * d]
    W_U = model.lm_head.weight.detach().double()
    for n, t in enumerate(c.tokens[:12]):
        logits = W_U @ (W_O @ (W_V @ key_side(k_embed.W_E.weight.detach().double()[t]) + b_V))
        assert int(c.copying[n]) == int((logits > logits[t]).sum())


def alignment_rows(root):
    """The docs/explorer.md table: each shipped encoder-decoder's alignment head, its key's score by part group."""
    rows, groups = [], []
    for ck in ("zh-en-postnorm", "zh-en", "zh-en-v1"):
        hm = load_checkpoint(root / ck); text = "我是一名工程师。"
        run = hm.run(text)
        v = claims.evaluate("cross_alignment", hm, text, {"predicts": "▁engineer", "source": "工程师"}).values
        pat = run.cache[f"decoder.{v['layer']}.cross_attn.hook_pattern"][0, v["head"], v["row"]]
        key = int(pat.argmax())
        t = score_terms(hm, run, "decoder.cross_attn", v["layer"], v["head"], v["row"], key)
        g = t.key_groups(by_layer=True)
        layers = " · ".join(f"{g.get(f'layer {i}', 0.0):.2f}" for i in range(hm.cfg.n_encoder_layers))
        rows.append(f"| {ck} | L{v['layer']}.H{v['head']} | {run.src_pieces[key]} ({float(pat[key]):.2f}) | {t.score:.2f} | "
                    f"{g['word']:.2f} | {g['position']:.2f} | {layers} | {g['bias']:.2f} |")
        groups.append(g)
    return rows, groups


def test_the_explorer_docs_table_of_alignment_heads_is_what_score_terms_gives():
    rows, groups = alignment_rows(ROOT / "checkpoints")
    assert all(g["position"] < g["word"] for g in groups)            # what the docs say of all three
    for path in (ROOT / "docs" / "explorer.md", ROOT / "docs" / "zh-CN" / "explorer.md"):
        text = path.read_text(encoding="utf-8")
        for row in rows:
            assert row in text, (path.name, row)
