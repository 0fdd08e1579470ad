"""DecodeSettings (issue 36 item 5): the decoding knobs as one value. A trace made from the settings is the trace
the loose arguments make (the old door, kept); None fields come from the model config; bad values refuse in one
line naming the allowed range."""
from __future__ import annotations

import dataclasses

import pytest

from viz_transformer.core.encoding import MAX_BEAM
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode

TEXT = "我是学生。"
LOOSE = [dict(strategy="greedy", max_new_tokens=6),
         dict(strategy="sample", max_new_tokens=6, temperature=0.7, top_k=20, top_p=0.9, seed=3),
         dict(strategy="beam", max_new_tokens=6, beam_width=3, length_penalty=0.5, early_stopping="never",
              n_candidates=4)]


@pytest.mark.parametrize("loose", LOOSE, ids=[d["strategy"] for d in LOOSE])
def test_settings_make_the_trace_the_loose_arguments_make(tiny_translator, loose):
    a = decode(tiny_translator, TEXT, **loose)
    b = decode(tiny_translator, TEXT, settings=DecodeSettings(**loose))
    assert b.strategy == loose["strategy"] and len(b.steps) == len(a.steps) > 0
    assert [s.token_id for s in b.steps] == [s.token_id for s in a.steps]
    assert [s.prob for s in b.steps] == [s.prob for s in a.steps]
    assert [[c.id for c in s.candidates] for s in b.steps] == [[c.id for c in s.candidates] for s in a.steps]
    assert len(b.steps[0].candidates) <= loose.get("n_candidates", 5)


def test_none_fields_come_from_the_model_config(tiny_translator):
    cfg = dataclasses.replace(tiny_translator.cfg, num_beams=32, length_penalty=0.8, early_stopping="never")
    s = DecodeSettings("beam").resolved(cfg, 7)
    assert (s.max_new_tokens, s.beam_width, s.length_penalty, s.early_stopping) == (7, MAX_BEAM, 0.8, "never")
    s = DecodeSettings("beam", beam_width=2, length_penalty=1.5, early_stopping=False).resolved(cfg, 3)
    assert (s.beam_width, s.length_penalty, s.early_stopping) == (2, 1.5, "false")


@pytest.mark.parametrize("bad, name", [(dict(strategy="nucleus"), "strategy"), (dict(temperature=0), "temperature"),
                                       (dict(top_p=1.5), "top_p"), (dict(beam_width=MAX_BEAM + 1), "beam_width"),
                                       (dict(early_stopping="sometimes"), "early_stopping")])
def test_bad_settings_refuse_in_one_line(tiny_translator, bad, name):
    with pytest.raises(ValueError) as e:
        decode(tiny_translator, TEXT, settings=DecodeSettings(**{"strategy": "beam", **bad}))
    assert name in str(e.value) and "\n" not in str(e.value)
