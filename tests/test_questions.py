"""Lesson questions (viz_transformer.analysis.questions) against independent recomputes: the heaviest key from
the captured q and k by hand, the greedy piece from a plain forward's last logits, a knock-out by a hook written
here, a head's role from its pattern; and the reveal figures highlight the answer."""
from __future__ import annotations

import math

import pytest
import torch

from viz_transformer.analysis import questions
from viz_transformer.core.batch import forward, make_batch
from viz_transformer.core.hook_names import available_blocks, block_prefix, n_layers
from viz_transformer.plots import question_figures as figures
from viz_transformer.run.decoding import default_new_tokens

ZH = "我是一名工程师。"


def _banned(tok) -> list[int]:
    return [i for i in (tok.pad_id, tok.unk_id, tok.bos_id) if i >= 0]


def plain_greedy(hm, text: str, hooks=()) -> list[int]:
    """Greedy decoding without the KV cache: a full forward per step, argmax of the last logits."""
    cfg, tok = hm.cfg, hm.tokenizer
    assert cfg.repetition_penalty == 1.0 and not cfg.forced_eos          # what plain argmax assumes
    inp = hm.run(text).input
    out: list[int] = []
    for _ in range(min(default_new_tokens(cfg), cfg.max_len - len(inp.prompt))):
        logits, _ = forward(hm.model, make_batch(cfg, [inp], [out]), hooks)
        last = logits[0, -1].clone()
        last[_banned(tok)] = float("-inf")
        nxt = int(last.argmax())
        if nxt in (cfg.eos_id, *cfg.stop_ids):
            break
        out.append(nxt)
    return out


@pytest.mark.parametrize("name", ["tiny-zh-en", "tiny-lm", "tiny-prefix"])
def test_the_heaviest_key_is_the_argmax_of_softmax_qk_over_the_allowed_keys(models, name):
    hm = models[name]
    run = hm.run(ZH if "zh" in name else "The cat sat on the mat.")
    for block in available_blocks(hm.cfg):
        prefix = block_prefix(block, n_layers(hm.cfg, block) - 1)
        rot = f"{prefix}.hook_rot_q" in run.cache
        q_all = run.cache[f"{prefix}.hook_rot_q" if rot else f"{prefix}.hook_q"][0]          # (T, nh, d)
        k_all = run.cache[f"{prefix}.hook_rot_k" if rot else f"{prefix}.hook_k"][0]          # (S, nkv, d)
        mask = run.cache[f"{prefix}.hook_mask"][0, 0].bool()                                 # (T, S)
        keys = run.src_pieces if block != "decoder.self_attn" else run.tgt_pieces
        for head in range(hm.cfg.n_heads):
            kv = head // (q_all.shape[1] // k_all.shape[1])
            scores = q_all[:, head] @ k_all[:, kv].T / math.sqrt(q_all.shape[-1])           # (T, S)
            w = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
            for row in range(q_all.shape[0]):
                got = questions.ask("argmax_key", hm, run.text, {"block": block, "layer": n_layers(hm.cfg, block) - 1,
                                                                 "head": head, "row": row})
                best = int(w[row].argmax())
                assert got.options[got.answer] == f"{best}:{keys[best]}"
                assert len(got.options) == int(mask[row].sum())                 # masked keys are no option
                assert got.evidence["best"] == best


@pytest.mark.parametrize("name, text", [("tiny-zh-en", ZH), ("tiny-lm", "Once upon a time")])
def test_the_next_piece_is_the_argmax_of_a_plain_forward_among_the_top_four(models, name, text):
    hm = models[name]
    tok, cfg = hm.tokenizer, hm.cfg
    run = hm.run(text)
    out = list(run.output_ids)
    positions = set()
    for step in range(1, min(len(run.trace.steps), 6) + 1):
        got = questions.ask("next_token", hm, text, {"step": step})
        logits, _ = forward(hm.model, make_batch(cfg, [run.input], [out[:step - 1]]))
        last = logits[0, -1].clone()
        last[_banned(tok)] = float("-inf")
        top = torch.softmax(last, -1).topk(4).indices.tolist()
        assert got.options[got.answer] == tok.piece(top[0])
        assert sorted(got.options) == sorted(tok.piece(i) for i in top)
        assert questions.ask("next_token", hm, text, {"step": step}).options == got.options   # a fixed order
        positions.add(got.answer)
    assert len(positions) > 1                                   # shuffled: the answer is not always first


KO = "今天天气很好。"       # in zh-en's encoder layer 0 one head's knock-out changes this output; 我是一名工程师。 none


def test_knocking_a_head_out_changes_the_output_exactly_when_a_hook_zeroing_it_does(zh_en):
    answers = []
    for head in range(zh_en.cfg.n_heads):
        def zero(z, hook, h=head):
            z = z.clone()
            z[:, :, h, :] = 0.0                                 # [batch, query_pos, head, d_head]
            return z
        changed = plain_greedy(zh_en, KO, [("encoder.0.self_attn.hook_z", zero)]) != plain_greedy(zh_en, KO)
        got = questions.ask("knockout_changes", zh_en, KO, {"block": "encoder.self_attn", "layer": 0, "head": head})
        assert got.options[got.answer] == ("yes" if changed else "no"), head
        assert got.evidence["changed"] == changed
        answers.append(got.answer)
    assert set(answers) == {0, 1}                               # both answers occur among these heads


def _role(p: torch.Tensor, mask: torch.Tensor, same: bool) -> str:
    """summaries.head_roles' rule, from one head's pattern [q, k] and mask, by hand."""
    T = p.shape[0]
    last = torch.tensor([int(torch.nonzero(mask[q]).max()) for q in range(T)])
    stats = {"first-token sink": float(p[:, 0].mean()), "end-token sink": float(p[torch.arange(T), last].mean())}
    if same:
        stats["self"] = float(torch.diagonal(p).mean())
        stats["previous-token"] = float(torch.diagonal(p, -1).mean())
        if abs(stats["end-token sink"] - stats["self"]) < 1e-9:
            del stats["end-token sink"]
    strong = {k: v for k, v in stats.items() if v >= 0.5}
    if strong:
        return max(strong, key=strong.get)
    ent = float(-(p * p.clamp_min(1e-30).log()).sum(-1).mean())
    return "broad" if ent >= 0.8 * float(mask.sum(-1).double().log().mean()) else "none"


def test_a_head_s_role_is_the_statistic_recomputed_from_its_pattern(zh_en):
    run = zh_en.run(ZH)
    seen = set()
    for block in available_blocks(zh_en.cfg):
        for layer in range(n_layers(zh_en.cfg, block)):
            prefix = block_prefix(block, layer)
            mask = run.cache[f"{prefix}.hook_mask"][0, 0].bool()
            for head in range(zh_en.cfg.n_heads):
                p = run.cache[f"{prefix}.hook_pattern"][0, head].double()
                got = questions.ask("head_role", zh_en, ZH, {"block": block, "layer": layer, "head": head})
                assert got.options[got.answer] == _role(p, mask, block != "decoder.cross_attn"), (block, layer, head)
                seen.add(got.options[got.answer])
                if block == "decoder.cross_attn":
                    assert "self" not in got.options and "previous-token" not in got.options
    assert {"self", "none"} <= seen                             # a clear role and no clear role both occur


def test_bad_arguments_say_what_is_wrong(tiny_translator):
    with pytest.raises(ValueError, match="unknown question kind"):
        questions.ask("nonsense", tiny_translator, ZH)
    with pytest.raises(ValueError, match="takes block, layer, head, row, not colour"):
        questions.ask("argmax_key", tiny_translator, ZH, {"colour": 1})
    with pytest.raises(ValueError, match="layer 9 is out of range"):
        questions.ask("head_role", tiny_translator, ZH, {"block": "encoder.self_attn", "layer": 9})
    with pytest.raises(ValueError, match="row 99 is out of range"):
        questions.ask("argmax_key", tiny_translator, ZH, {"row": 99})
    with pytest.raises(ValueError, match="step 999 is out of range"):
        questions.ask("next_token", tiny_translator, ZH, {"step": 999})


def test_the_reveal_figures_highlight_the_answer():
    fig = figures.key_row([0.1, 0.2, 0.6, 0.1], ["a", "b", "c", "d"], [True] * 3 + [False], "b", 1, "t",
                          revealed=True, best=2, picked=0)
    frames = {s.line.color: (s.x0 + s.x1) / 2 for s in fig.layout.shapes}
    assert frames == {figures.ANSWER: 2, figures.PICKED: 0}                  # the answer's cell, the pick's cell
    assert math.isnan(fig.data[0].z[0][3])                                  # the masked key shows no weight
    hidden = figures.key_row([0.1, 0.2, 0.6, 0.1], ["a", "b", "c", "d"], [True] * 3 + [False], "b", 1, "t",
                             revealed=False)
    assert list(hidden.data[1].customdata) == [0, 1, 2]                     # clickable: the allowed keys only
    assert not any(v == v and v != 0 for v in hidden.data[0].z[0])          # no weight is given away
    bars = figures.role_scores({"self": 0.7, "previous-token": 0.2}, 0.5, "self", "r")
    assert list(bars.data[0].marker.line.width) == [4, 0]
    out = figures.outputs(["▁I", "▁am"], ["▁I", "▁was", "."], "o")
    assert out.data[0].z[0].tolist() == [0.0, 1.0, 1.0]
