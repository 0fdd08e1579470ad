"""Knock-out and patching on an encoder-only model: it generates nothing, so both measure the log p of
the masked-LM head's top piece at the first [MASK]. Checked against transformers' own BertForMaskedLM on the same
folder, with a head zeroed, or a head or residual stream copied from text A into text B's run, by hooks written
here (a head: its slice of the attention output, before the output projection); without a [MASK] each page says
what to type, in one line."""
from __future__ import annotations

import pytest
import torch
import transformers

import hf_bert_util as B
from app_util import by_key, open_app
from viz_explorer.kit.strings import EN
from viz_explorer.kit.strings_zh import ZH
from viz_transformer import load_checkpoint
from viz_transformer.run.blank_effect import blank_target, rank_heads_at_blank
from viz_transformer.run.patching import patching_scores

pytestmark = pytest.mark.slow          # transformers builds the model folder

NAME = "tiny-bert"
A, PAIR_B = "The cat sat on the [MASK].", B.PAIR[1]
TEXT = f"{A} [SEP] {PAIR_B}"
PAGE = "viz_explorer/pages/experiment/knockout.py"
OTHER = f"The mat sat on the [MASK]. [SEP] {PAIR_B}"       # B: one piece differs from TEXT (cat / mat)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert-knockout")
    B.build(B.SHAPE_BY_ID["bert-mlm"], root / NAME)
    return root


def hf_blank_logprobs(folder, layer: int | None, head: int | None) -> tuple[torch.Tensor, int]:
    """transformers' log-probabilities at the first [MASK] with head `head` of layer `layer` zeroed (None: none)."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = B.load_hf(folder, mlm=True)
    enc = tok(A, PAIR_B, return_tensors="pt")
    pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0])
    handle = None
    if layer is not None:
        d = model.config.hidden_size // model.config.num_attention_heads

        def zero(module, args):                           # the heads' context, concatenated: [batch, q, d_model]
            x = args[0].clone()
            x[..., head * d:(head + 1) * d] = 0
            return (x,)
        handle = model.bert.encoder.layer[layer].attention.output.dense.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            logits = model(**enc).logits[0, pos].double()
    finally:
        if handle is not None:
            handle.remove()
    return torch.log_softmax(logits, -1), pos


def test_each_head_s_effect_at_the_blank_matches_transformers(root):
    hm = load_checkpoint(root / NAME)
    base, pos = hf_blank_logprobs(root / NAME, None, None)
    target = blank_target(hm, hm.run(TEXT))
    assert target == (pos, int(base.argmax()))
    df = rank_heads_at_blank(hm, TEXT)
    assert len(df) == hm.cfg.n_encoder_layers * hm.cfg.n_heads
    for row in df.itertuples():
        off, _ = hf_blank_logprobs(root / NAME, row.layer, row.head)
        assert abs(row.delta_logprob - float(off[target[1]] - base[target[1]])) < 1e-4, row
        assert row.output_changed == (int(off.argmax()) != target[1])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_shows_the_change_at_the_blank(env, lang):
    table = ZH if lang == "zh" else EN
    at = open_app(PAGE, ckpt=NAME, text=TEXT, lang=lang)
    base, _ = hf_blank_logprobs(env / NAME, None, None)
    top = int(base.argmax())
    hm = load_checkpoint(env / NAME)
    pos = blank_target(hm, hm.run(TEXT))[0]
    assert table["ko.blank_what"].format(piece=hm.tokenizer.pieces([top])[0], i=pos) in [c.value for c in at.caption]
    by_key(at.button_group, "ko_pick_encoder.self_attn").set_value([EN["ko.cell"].format(layer=0, head=1)]).run(timeout=60)
    assert not at.exception, [e.value for e in at.exception]
    off, _ = hf_blank_logprobs(env / NAME, 0, 1)
    before, after = (float(m.value) for m in at.metric[:2])
    assert abs(before - float(base[top])) < 1e-3 and abs(after - float(off[top])) < 1e-3
    at.button(key="ko_rank").click().run(timeout=60)                 # every head alone, ranked at the blank
    assert not at.exception, [e.value for e in at.exception]
    table_df = next(d.value for d in at.dataframe if table["ko.col.blank_changed"] in d.value.columns)
    row = table_df[(table_df.iloc[:, 1] == 1) & (table_df.iloc[:, 2] == 2)].iloc[0]
    off12, _ = hf_blank_logprobs(env / NAME, 1, 2)
    assert abs(row[table["ko.col.delta"]] - float(off12[top] - base[top])) < 1e-4


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_without_a_blank_the_page_says_what_to_type(env, lang):
    at = open_app(PAGE, ckpt=NAME, text=f"{B.PAIR[0]} [SEP] {PAIR_B}", lang=lang)
    table = ZH if lang == "zh" else EN
    assert [i.value for i in at.info] == [table["ko.blank_none"].format(mask="[MASK]")]


def hf_patched(folder, layer_head=None, stream=None):
    """transformers: A's top piece at A's [MASK] and its log p in B's run with one component of A's run copied in:
    layer_head=(layer, head): that head's context slice; stream=(i, pos): the residual stream i (0 the embeddings'
    output, i the output of layer i - 1) at pos."""
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = B.load_hf(folder, mlm=True)
    enc_a, enc_b = tok(A, PAIR_B, return_tensors="pt"), tok("The mat sat on the [MASK].", PAIR_B, return_tensors="pt")
    pos = int((enc_a["input_ids"][0] == tok.mask_token_id).nonzero()[0])
    saved = {}
    if layer_head is not None:
        layer, head = layer_head
        d = model.config.hidden_size // model.config.num_attention_heads
        cut = slice(head * d, (head + 1) * d)
        module = model.bert.encoder.layer[layer].attention.output.dense

        def pre(m, args):                               # the heads' context: [batch, q, d_model]
            if "a" not in saved:
                saved["a"] = args[0][..., cut].clone()
                return None
            x = args[0].clone()
            x[..., cut] = saved["a"]
            return (x,)
        handle = module.register_forward_pre_hook(pre)
    else:
        i, q = stream
        module = model.bert.embeddings if i == 0 else model.bert.encoder.layer[i - 1]

        def post(m, args, out):
            h = out[0] if isinstance(out, tuple) else out        # [batch, pos, d_model]
            if "a" not in saved:
                saved["a"] = h[:, q].clone()
                return None
            h = h.clone()
            h[:, q] = saved["a"]
            return (h,) + tuple(out[1:]) if isinstance(out, tuple) else h
        handle = module.register_forward_hook(post)
    try:
        with torch.no_grad():
            top = int(model(**enc_a).logits[0, pos].argmax())
            logits = model(**enc_b).logits[0, pos].double()
    finally:
        handle.remove()
    return top, float(torch.log_softmax(logits, -1)[top])


def test_patching_at_the_blank_matches_transformers(root):
    hm = load_checkpoint(root / NAME)
    heads = patching_scores(hm, TEXT, OTHER, "heads")
    for row in heads.itertuples():
        top, want = hf_patched(root / NAME, layer_head=(row.layer, row.head))
        assert heads.attrs["output_a"] == hm.tokenizer.pieces([top])[0]
        assert abs(row.logprob - want) < 1e-4, row
    resid = patching_scores(hm, TEXT, OTHER, "resid")
    for row in resid[resid["pos"].isin([2, 6])].itertuples():      # the piece that differs, the [MASK]
        assert abs(row.logprob - hf_patched(root / NAME, stream=(row.layer, row.pos))[1]) < 1e-4, row


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_patching_page_measures_the_blank(env, lang):
    table = ZH if lang == "zh" else EN
    page = "viz_explorer/pages/experiment/patching.py"
    at = open_app(page, ckpt=NAME, text=TEXT, lang=lang)
    assert table["pt.blank_what"] in [c.value for c in at.caption]
    at.text_input(key="pt_text_encoder").set_value(OTHER).run(timeout=60)     # a tiny model: patched at once
    assert not at.exception, [e.value for e in at.exception]
    top, _ = hf_patched(env / NAME, layer_head=(0, 0))
    assert at.text[0].value == load_checkpoint(env / NAME).tokenizer.pieces([top])[0]
    assert any(c.value.startswith(table["pt.blank_logprob"].split("{a")[0]) for c in at.caption)
    at2 = open_app(page, ckpt=NAME, text=f"{B.PAIR[0]} [SEP] {PAIR_B}", lang=lang)
    assert [i.value for i in at2.info] == [table["pt.blank_none"].format(mask="[MASK]")]
