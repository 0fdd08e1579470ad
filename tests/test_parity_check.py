"""run.parity.check: every family's folder, run here and in transformers, is reported as matching, and the report
can fail: a model changed after loading (one weight nudged, one head's scores scaled) is reported as differing,
with the numbers of the difference. The command line's `check` prints the one-line verdict (status 0 when it
matches, 1 when it differs, 2 for a folder it cannot check)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import hf_bert_util as B
import hf_t5_util as T
import hf_util as H
from viz_transformer import load_checkpoint
from viz_transformer.run import parity

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"gpt2": lambda f: H.build(H.SHAPES[0], f),
           "llama": lambda f: H.build(next(s for s in H.SHAPES if s.family == "llama"), f),
           "bert-mlm": lambda f: B.build(B.SHAPE_BY_ID["bert-mlm"], f),
           "bert-bare": lambda f: B.build(B.SHAPE_BY_ID["bert-bare-4heads"], f),
           "marian": lambda f: H.build_marian(H.MARIAN_BY_ID["marian-3heads"], f),
           "t5": lambda f: T.build_t5(T.T5_BY_ID["t5-v1.1-gated-gelu"], f)}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root, memo = tmp_path_factory.mktemp("parity"), {}

    def get(name: str) -> Path:
        if name not in memo:
            memo[name] = FOLDERS[name](root / name)
        return memo[name]
    return get


@pytest.mark.parametrize("name", list(FOLDERS))
def test_every_family_matches_transformers(folders, name):
    report = parity.check(load_checkpoint(folders(name)))
    assert report.ok, parity.summary(report)
    assert len(report.results) == len(parity.TEXTS) and report.worst_pattern < 1e-5
    assert report.compared == ("hidden states" if name == "bert-bare" else "logits")
    assert all(r.top_agrees is (None if name == "bert-bare" else True) for r in report.results)
    assert parity.summary(report).startswith("matches transformers")


@pytest.mark.parametrize("name", ["gpt2", "marian", "bert-bare"])
def test_a_changed_model_is_reported_as_differing(folders, name):
    """A bias of the last attention layer nudged by N(0, 0.05²) (a uniform shift would vanish in the next norm):
    the report says so, with its size."""
    hm = load_checkpoint(folders(name))
    params = [(n, p) for n, p in hm.model.named_parameters() if p.ndim == 1 and "attn" in n]
    with torch.no_grad():
        params[-1][1].add_(0.05 * torch.randn(params[-1][1].shape, generator=torch.Generator().manual_seed(0)))
    report = parity.check(hm)
    assert not report.ok and report.worst_logits > parity.LOGITS_TOL, parity.summary(report)
    assert parity.summary(report).startswith("differs from transformers")


def test_our_own_checkpoint_is_refused_in_one_line(tiny_translator):
    with pytest.raises(ValueError, match="not one") as e:
        parity.check(tiny_translator)
    assert "\n" not in str(e.value)


def test_without_transformers_one_line_says_how_to_install(folders, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)           # import transformers raises ImportError
    with pytest.raises(parity.MissingTransformers, match=r"pip install transformers==") as e:
        parity.check(load_checkpoint(folders("gpt2")))
    assert "\n" not in str(e.value)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "viz_transformer", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_the_check_command(folders, tmp_path):
    ok = _cli("check", str(folders("bert-mlm")))
    assert ok.returncode == 0 and ok.stdout.startswith("matches transformers"), ok.stderr
    missing = _cli("check", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    ours = _cli("check", str(ROOT / "checkpoints" / "zh-en"))
    assert ours.returncode == 2 and "not one" in ours.stderr and len(ours.stderr.strip().splitlines()) == 1
