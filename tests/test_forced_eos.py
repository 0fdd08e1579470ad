"""forced_eos_token_id: at the length limit transformers forces the folder's forced_eos_token_id as the
last token, in greedy and beam search, whether or not it is the end id. A tiny random Marian (tests/hf_util.py)
whose generation config forces an id other than its eos_token_id: ours gave the model's argmax there."""
from __future__ import annotations

import json

import pytest
import torch

import hf_util as H
from viz_transformer import decode, DecodeSettings, load_checkpoint

pytestmark = pytest.mark.slow          # transformers builds the model folder

FORCED = 5                             # a piece of the vocabulary, not </s> (0)


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    folder = H.build_marian(H.MARIAN_BY_ID["marian-3heads"], tmp_path_factory.mktemp("marian") / "m")
    for name in ("config.json", "generation_config.json"):
        path = folder / name
        cfg = json.loads(path.read_text())
        cfg["forced_eos_token_id"] = FORCED
        path.write_text(json.dumps(cfg))
    ref, tok = H.load_marian(folder)
    assert ref.generation_config.forced_eos_token_id == FORCED != ref.generation_config.eos_token_id
    return ref, tok, load_checkpoint(folder)


def test_the_config_keeps_the_forced_id(marian):
    _, _, hm = marian
    assert hm.cfg.forced_eos and hm.cfg.forced_eos_id == FORCED and hm.cfg.eos_id == 0


@pytest.mark.parametrize("n", [3, 9, 31])
def test_greedy_and_beam_force_the_id_as_generate_does(marian, n):
    ref, tok, hm = marian
    reached = 0
    for text in H.MARIAN_SRC:
        with torch.no_grad():
            greedy = ref.generate(**tok(text, return_tensors="pt"), do_sample=False, num_beams=1,
                                  max_new_tokens=n)[0, 1:].tolist()
            beam = ref.generate(**tok(text, return_tensors="pt"), do_sample=False, num_beams=3,
                                max_new_tokens=n)[0, 1:].tolist()
        ours = decode(hm, text, DecodeSettings("greedy", max_new_tokens=n)).output_ids
        assert ours == greedy, (text, ours, greedy)
        assert decode(hm, text, DecodeSettings("beam", beam_width=3, max_new_tokens=n)).output_ids == beam, text
        reached += len(greedy) == n and greedy[-1] == FORCED
    assert reached                          # some text ran to the limit: the rule was exercised
