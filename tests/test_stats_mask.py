"""summaries.pattern_stats reads the last allowed key and the largest entropy off the mask as captured ([B, 1, Q, K],
one for every head); the same mask given per head ([B, H, Q, K], the full computation) must give the same numbers."""
from __future__ import annotations

import torch

from viz_transformer.analysis import summaries
from viz_transformer.analysis.patterns import hook_name


def test_a_shared_mask_gives_what_the_same_mask_per_head_gives(tiny_translator):
    run = tiny_translator.run("我们明天在学校门口见面，然后一起去北京。", lean=True)
    for block in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"):
        pattern, mask = run.cache[hook_name(block, 0, "hook_pattern")], run.cache[hook_name(block, 0, "hook_mask")]
        B, H, Q, K = pattern.shape
        assert mask.shape[1] == 1
        q_valid, punct = torch.ones(B, Q, dtype=torch.bool), torch.rand(B, K) > 0.5
        shared = summaries.pattern_stats(pattern, mask, q_valid, punct, same_sequence="self" in block)
        per_head = summaries.pattern_stats(pattern, mask.expand(B, H, Q, K).clone(), q_valid, punct,
                                           same_sequence="self" in block)
        for k in summaries.STATS:
            assert torch.equal(shared[k].isnan(), per_head[k].isnan()), k
            assert torch.equal(shared[k].nan_to_num(), per_head[k].nan_to_num()), k
