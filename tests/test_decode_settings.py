"""DecodeSettings: the decoding knobs as one value, decode's only door for them. The settings reach the trace;
None fields come from the model config; bad values refuse in one line naming the allowed range."""
from __future__ import annotations

import dataclasses

import pytest

from viz_transformer.core.encoding import MAX_BEAM
from viz_transformer.run.decode_settings import DecodeSettings
from viz_transformer.run.decoding import decode

TEXT = "我是学生。"
SETTINGS = [DecodeSettings("greedy", max_new_tokens=6),
            DecodeSettings("sample", max_new_tokens=6, temperature=0.7, top_k=20, top_p=0.9, seed=3),
            DecodeSettings("beam", max_new_tokens=6, beam_width=3, length_penalty=0.5, early_stopping="never",
                           n_candidates=4)]


@pytest.mark.parametrize("settings", SETTINGS, ids=[s.strategy for s in SETTINGS])
def test_the_settings_reach_the_trace(tiny_translator, settings):
    trace = decode(tiny_translator, TEXT, settings)
    assert trace.strategy == settings.strategy and 0 < len(trace.steps) <= settings.max_new_tokens
    assert all(0 < len(s.candidates) <= settings.n_candidates for s in trace.steps)
    again = decode(tiny_translator, TEXT, settings=settings)          # a seeded sample repeats too
    assert [s.token_id for s in again.steps] == [s.token_id for s in trace.steps]


def test_the_knobs_come_as_one_value_and_hooks_by_name(tiny_translator):
    with pytest.raises(TypeError):
        decode(tiny_translator, TEXT, strategy="beam", beam_width=3)
    with pytest.raises(TypeError):
        decode(tiny_translator, TEXT, DecodeSettings(), ())


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
