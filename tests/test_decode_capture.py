"""Patterns taken while decoding equal a teacher-forced forward's capture of the same output (run_padded), row for
row where the rows count, on the shipped encoder-decoder translators (pre- and post-norm) and the tiny one."""
import pytest
import torch

from viz_transformer import load_checkpoint
from viz_transformer.core.hook_names import available_blocks, hook_name, n_layers
from viz_transformer.run.capture import run_padded
from viz_transformer.run.decode_capture import decode_with_patterns

from conftest import ROOT

TEXTS = ["我是一名工程师。", "今天天气很好，我们去公园散步吧。", "他不喜欢喝咖啡。", "你好！",
         "这本书是我昨天在图书馆借的，明天要还。"]


def _names(cfg):
    return [hook_name(b, i, h) for b in available_blocks(cfg) for i in range(n_layers(cfg, b))
            for h in ("hook_pattern", "hook_mask")]


def _check(hm, texts, max_new_tokens=None, batch_size=64):
    seen = 0
    for batch, got in decode_with_patterns(hm, texts, max_new_tokens, batch_size):
        # the batch's rows are sorted by length: the reference runs the same texts in the same order
        want_batch, cache = run_padded(hm, [_text_of(hm, texts, r) for r in batch.src.tolist()], max_new_tokens)
        assert torch.equal(want_batch.dec, batch.dec) and torch.equal(want_batch.src, batch.src)
        for name in _names(hm.cfg):
            want, have = cache[name], got[name]
            part = "encoder" if name.startswith("encoder") else "decoder"
            lens = batch.src_len if part == "encoder" else batch.dec_len
            for r, n in enumerate(lens):                   # the rows that count: a sentence's own queries
                w, h = want[r, :, :n], have[r, :, :n]
                if name.endswith("hook_mask"):
                    assert torch.equal(w.expand_as(h) if w.shape != h.shape else w, h), name
                else:
                    assert torch.allclose(w.float(), h.float(), atol=1e-5), name
        seen += len(batch)
    assert seen == len(texts)


def _text_of(hm, texts, src_row):
    """The text whose source ids are this (padded) row."""
    from viz_transformer.core.encoding import encode_input
    for t in texts:
        ids = list(encode_input(hm.tokenizer, hm.cfg, t).src)
        if src_row[:len(ids)] == ids and all(i == hm.cfg.pad_id for i in src_row[len(ids):]):
            return t
    raise AssertionError("no text has these source ids")


@pytest.mark.parametrize("name", ["zh-en", "zh-en-postnorm"])
def test_patterns_taken_while_decoding_equal_a_forward_of_the_output(name):
    _check(load_checkpoint(ROOT / "checkpoints" / name), TEXTS, batch_size=3)


def test_a_row_stopped_by_the_token_limit_is_read_by_a_forward(tiny_translator):
    _check(tiny_translator, TEXTS, max_new_tokens=3, batch_size=2)    # three tokens: every row stops at the limit


def test_only_an_encoder_decoder_model_decodes_with_patterns(tiny_lm):
    with pytest.raises(ValueError, match="encoder-decoder"):
        next(decode_with_patterns(tiny_lm, ["Once upon a time."]))
