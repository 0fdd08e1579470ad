"""Knock-out on an encoder-only model (issue 39): it generates nothing, so the page measures the change in log p of
the masked-LM head's top piece at the first [MASK]. Checked against transformers' own BertForMaskedLM on the same
folder, with the head zeroed by a hook written here (its slice of the attention output, before the output
projection); without a [MASK] the page says what to type, in one line."""
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

pytestmark = pytest.mark.slow          # transformers builds the model folder

NAME = "tiny-bert"
A, PAIR_B = "The cat sat on the [MASK].", B.PAIR[1]
TEXT = f"{A} [SEP] {PAIR_B}"
PAGE = "viz_explorer/pages/experiment/knockout.py"


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


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_without_a_blank_the_page_says_what_to_type(env, lang):
    at = open_app(PAGE, ckpt=NAME, text=f"{B.PAIR[0]} [SEP] {PAIR_B}", lang=lang)
    table = ZH if lang == "zh" else EN
    assert [i.value for i in at.info] == [table["ko.blank_none"].format(mask="[MASK]")]
