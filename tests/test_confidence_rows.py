"""The confidence line's log-probs read a block of rows at a time (a 2,048-piece text on a 151,936-piece vocabulary
is never normalised whole): equal to log_softmax over the whole logits, then the picked entries."""
import math

import torch

from viz_transformer.analysis.confidence import picked_logprobs, prompt_perplexity, token_logprobs


def test_picked_rows_equal_the_whole_normalisation():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(600, 97, generator=g) * 4
    ids = torch.randint(0, 97, (600,), generator=g).tolist()
    want = torch.log_softmax(logits, -1)[torch.arange(600), torch.tensor(ids)]
    assert torch.equal(picked_logprobs(logits, ids), want)
    assert torch.equal(picked_logprobs(logits.half(), ids, rows=7), torch.log_softmax(logits.half().float(), -1)[
        torch.arange(600), torch.tensor(ids)])
    assert picked_logprobs(logits, []).numel() == 0


def test_a_run_s_token_log_probs_and_perplexity_equal_the_whole_normalisation(tiny_lm):
    from viz_transformer import HookedModel
    hm = tiny_lm if isinstance(tiny_lm, HookedModel) else HookedModel(tiny_lm)
    run = hm.run("the cat sat on the mat and then the dog sat on the cat")
    lp = torch.log_softmax(run.logits.float(), -1)
    from viz_transformer.analysis.confidence import scored_ids
    ids = scored_ids(run, hm.cfg)[: run.logits.shape[0] - run.prompt_len + 1]
    pos = torch.arange(run.prompt_len - 1, run.prompt_len - 1 + len(ids))
    assert len(ids) > 0 and torch.equal(token_logprobs(run, hm.cfg), lp[pos, torch.tensor(ids)])
    prompt = run.tgt_ids[1:run.prompt_len]
    want = math.exp(-lp[torch.arange(len(prompt)), torch.tensor(prompt)].mean().item())
    assert prompt and prompt_perplexity(run) == want
