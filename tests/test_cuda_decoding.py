"""Training on a GPU scores and snapshots the model where it is: decoding and capture follow the model's device.
Runs only where CUDA is (the CI machine has none; the GPU retraining of zh-en-postnorm went through these paths)."""
import pytest
import torch

from viz_transformer.run.capture import HookedModel
from viz_transformer.run.decoding import greedy_batch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")

TEXTS = ["我是一名工程师。", "今天天气很好。", "你叫什么名字？"]


def test_greedy_on_the_gpu_equals_the_cpu(zh_en):
    cpu = greedy_batch(zh_en.model, zh_en.tokenizer, TEXTS)
    gpu = greedy_batch(zh_en.model.to("cuda"), zh_en.tokenizer, TEXTS)
    zh_en.model.to("cpu")
    assert gpu == cpu


def test_a_capture_on_the_gpu_has_the_cpu_patterns(zh_en):
    name = "decoder.0.cross_attn.hook_pattern"
    cpu = zh_en.run(TEXTS[0], names_filter=lambda n: n == name)
    gpu = HookedModel(zh_en.model.to("cuda"), zh_en.tokenizer).run(TEXTS[0], names_filter=lambda n: n == name)
    zh_en.model.to("cpu")
    assert gpu.tgt_pieces == cpu.tgt_pieces
    torch.testing.assert_close(gpu.cache[name].cpu(), cpu.cache[name], atol=1e-4, rtol=1e-3)
