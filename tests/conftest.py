"""Shared fixtures: tiny checkpoints made here (random weights, a small SentencePiece model)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# torch, the library and streamlit are imported where they are used, not here: pytest.ini's -n 2 controller loads
# this file too and runs no test, so the workers would wait for its imports (pytest_configure below)

CORPORA = ROOT.parent / "shared" / "data"       # the training corpora: beside the checkout, never in it (README, Credits)
TATOEBA = CORPORA / "zh-en" / "tatoeba-cmn-eng.tsv"
STORIES = CORPORA / "lm" / "tinystories-2MiB.txt"

ZH = ["我是一名工程师。", "我是学生。", "我爱你。", "今天天气很好。", "你叫什么名字？", "我喜欢喝茶。",
      "他是我的朋友。", "我们明天去北京。", "这是我的书。", "她在学校工作。"]
EN = ["I am an engineer.", "I am a student.", "I love you.", "The weather is nice today.",
      "What is your name?", "I like to drink tea.", "He is my friend.", "We are going to Beijing tomorrow.",
      "This is my book.", "She works at the school.", "Once upon a time there was a little dog.",
      "The cat sat on the mat and looked at the bird."]


def tiny_tokenizer(sep: bool = False):
    from viz_transformer.core.tokenizer import Tokenizer
    return Tokenizer.train((ZH + EN) * 5, vocab_size=400, hard_vocab_limit=False, sep=sep)


def make_tiny_checkpoint(folder: Path, architecture: str = "encoder_decoder", seed: int = 0, sep: bool = False,
                         **over) -> Path:
    """sep=True: a one-sequence translator ([begin] src [sep] tgt) of a decoder-only/prefix-LM architecture."""
    import torch

    from viz_transformer.core.checkpoint import save_checkpoint
    from viz_transformer.core.config import ModelConfig
    from viz_transformer.core.model import Transformer
    tok = tiny_tokenizer(sep)
    torch.manual_seed(seed)
    kw = dict(vocab_size=tok.vocab_size, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
              d_ff=64, dropout=0.0, max_len=64, architecture=architecture)
    if architecture != "encoder_decoder":
        kw["n_encoder_layers"] = 0
    if sep:
        kw["sep_id"] = tok.sep_id
    kw.update(over)
    model = Transformer(ModelConfig(**kw))
    meta = {"task": "test", "data": "made by tests/conftest.py", "trained_at": "never (random weights)"}
    return save_checkpoint(folder, model, tok, meta, fp16=False)


def skip_or_fail(reason: str) -> None:
    """Something a test needs is not on this machine (PostgreSQL, the corpora): skip with the reason, so the
    README's test command passes on a fresh clone; in CI (CI=true) fail instead, where the test must run."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def training_data() -> Path:
    """The training corpora's folder, for tests that rebuild a shipped model's splits (its meta.json names the
    files there); skips without it (skip_or_fail)."""
    missing = [p for p in (TATOEBA, STORIES) if not p.exists()]
    if missing:
        skip_or_fail(f"the training corpora (README, Credits) are not beside the checkout: {missing[0]} is missing")
    return CORPORA


@pytest.fixture(scope="session")
def ckpt_root(tmp_path_factory) -> Path:
    """A checkpoints/ folder with a tiny translator, a tiny LM, a tiny prefix-LM, and tiny decoder-only
    and prefix-LM translators."""
    root = tmp_path_factory.mktemp("checkpoints")
    make_tiny_checkpoint(root / "tiny-zh-en", "encoder_decoder")
    make_tiny_checkpoint(root / "tiny-lm", "decoder_only", positional="learned", norm="post", activation="gelu")
    make_tiny_checkpoint(root / "tiny-prefix", "prefix_lm")
    make_tiny_checkpoint(root / "tiny-zh-en-decoder", "decoder_only", sep=True)
    make_tiny_checkpoint(root / "tiny-zh-en-prefix", "prefix_lm", sep=True)
    return root


@pytest.fixture
def root(ckpt_root) -> Path:
    """The checkpoints folder the app reads in a test: the tiny ones; a test file with models of its own (a
    Hugging Face folder, say) defines its own `root`."""
    return ckpt_root


@pytest.fixture
def env(root, monkeypatch) -> Path:
    """The app reads `root` (VIZ_CHECKPOINTS) for one test; returns it."""
    monkeypatch.setenv("VIZ_CHECKPOINTS", str(root))
    return root


@pytest.fixture(scope="session")
def tiny_translator(ckpt_root):
    from viz_transformer import load_checkpoint
    return load_checkpoint(ckpt_root / "tiny-zh-en")


@pytest.fixture(scope="session")
def tiny_lm(ckpt_root):
    from viz_transformer import load_checkpoint
    return load_checkpoint(ckpt_root / "tiny-lm")


# -- tiers (pytest.ini's markers): `-m "not slow"` is the fast tier, `-m browser` / `-m train` those kinds ----------
TIERS = pytest.StashKey[dict]()      # node id -> (mark names, fixture names) of every collected test, before -m


@pytest.hookimpl(tryfirst=True)      # before -m deselects
def pytest_collection_modifyitems(config, items):
    """A browser or train test is slow too; every test's marks and fixtures are kept for tests/test_tiers.py; files
    run slowest kind first."""
    for item in items:
        if item.get_closest_marker("browser") or item.get_closest_marker("train"):
            item.add_marker(pytest.mark.slow)
    config.stash[TIERS] = {item.nodeid: ({m.name for m in item.iter_markers()}, set(getattr(item, "fixturenames", ())))
                           for item in items}
    # Files with a browser test first, then the other slow ones, then the rest, each file's tests together and in
    # their order: pytest.ini's workers (-n 2 --dist loadfile --no-loadscope-reorder) take files in this order, so
    # the longest walks start early and the many short files even the two workers out at the end.
    # The longest files (LONGEST, measured) go first of all: a long file handed out late bounds the wall time.
    rank: dict = {}
    for item in items:
        r = 0 if item.get_closest_marker("browser") else 1 if item.get_closest_marker("slow") else 2
        rank[item.path] = min(rank.get(item.path, (2,)), (r,))
    for path in rank:
        if path.name in LONGEST:
            rank[path] = (-1, LONGEST.index(path.name))
    items.sort(key=lambda item: rank[item.path])              # stable: a file's tests stay in order


# Longest first, from `python -m pytest --durations=0` per file (docs/benchmarks.md, Test suite): each over a minute
# on 2 idle cores. A worker left with 2 tests or fewer takes the next file at once (xdist's loadscope), so a file of
# one test takes the one after it too: the two one-test legibility walks go first, one to each worker, then the
# class-access walk (5 tests) to the first.
LONGEST = ("test_browser_legibility.py", "test_browser_legibility_zh.py", "test_browser_class_access.py",
           "test_recipes.py", "test_browser_links.py")


# A test's VIZ_CHECKPOINTS is the app's only root (the shipped models left out), as it is for every server a
# test starts; tests/test_checkpoint_roots.py unsets it to check the roots added beside the shipped folder.
os.environ.setdefault("VIZ_CHECKPOINTS_ONLY", "1")


def _scan_components_once() -> None:
    """Every AppTest's first run scans every installed distribution's metadata for Streamlit components, most of a
    first run's time. What is installed does not change during
    the suite, so each worker scans once: Streamlit's own scanner, remembered (where an upgrade moves it, each run
    scans again)."""
    import functools

    from streamlit.components.v2 import manifest_scanner
    scan = getattr(manifest_scanner, "scan_component_manifests", None)
    if scan is not None and not hasattr(scan, "cache_info"):
        manifest_scanner.scan_component_manifests = functools.cache(scan)


def _compile_each_script_once() -> None:
    """Every AppTest run compiles app.py and its page anew (a fresh ScriptCache a run, Streamlit's magic rewrite
    of the source first: 6 % of the AppTest tests' time); the server compiles each once. Here each worker keeps
    the bytecode by the script's path and its current text, so an edited script is compiled again
    (tests/test_apptest_kit.py)."""
    from streamlit import config
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    compiled: dict = {}

    class CompiledOnce(ScriptCache):
        def get_bytecode(self, script_path: str):
            path = os.path.abspath(script_path)
            key = (path, Path(path).read_bytes(), config.get_option("runner.magicEnabled"))
            if key not in compiled:
                compiled[key] = super().get_bytecode(path)
            return compiled[key]

    for module in (app_test, local_script_runner):          # the pages' cache, the main script's
        if getattr(module, "ScriptCache", None) is ScriptCache:
            module.ScriptCache = CompiledOnce


def pytest_configure(config):
    """In a process that runs tests (a worker, or the one process of -n 0), not in the -n 2 controller: torch on
    one thread (tiny models gain nothing from intra-op threads, and on a busy machine two threads spin against each
    other: 10x slower measured), and Streamlit's component scan and script compiles done once."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return                                         # the controller: it hands files out and runs none
    import torch
    torch.set_num_threads(1)
    _scan_components_once()
    _compile_each_script_once()


@pytest.fixture(autouse=True, scope="session")
def _own_data_folder(tmp_path_factory):
    """The app's data folder (its database, the corpus results it keeps) for this test run alone: never the data/
    beside app.py, whose results from a developer's session would answer a test's corpus run before it starts."""
    old = os.environ.get("VIZ_DATA")
    os.environ["VIZ_DATA"] = str(tmp_path_factory.mktemp("viz-data"))
    yield
    if old is None:
        os.environ.pop("VIZ_DATA", None)
    else:
        os.environ["VIZ_DATA"] = old


@pytest.fixture(autouse=True)
def _same_threads_after_each_test():
    """Training sets torch's thread count (--threads); put it back, so a later test's numbers (a beam search's
    near-ties against transformers, say) do not depend on which tests ran before it."""
    import torch
    n = torch.get_num_threads()
    yield
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


# -- the browser tests (tests/browser_util.py) ---------------------------------------------------------------------
@pytest.fixture(scope="session")
def server(ckpt_root):
    """The real server on a free port, one for the session's browser tests (they share no state but the loaded
    models; one a worker under pytest.ini's -n); the shipped checkpoints if zh-en loads, else the tiny ones.
    Yields (url, checkpoints folder)."""
    from browser_util import app_server, usable
    real = ROOT / "checkpoints"
    root = real if usable(real / "zh-en") else ckpt_root
    worker = os.environ.get("PYTEST_XDIST_WORKER")    # pytest.ini's -n: each worker process has a server of its own
    with app_server(root, f"server-{worker}.log" if worker else "server.log") as url:
        yield url, root


@pytest.fixture(scope="module")
def page(server):
    """A chromium page of the module's own (each module's tests navigate one browser, in order)."""
    from playwright.sync_api import sync_playwright
    from browser_util import ARGS, CHROMIUM, TIMEOUT_MS
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1440, "height": 2200})
        pg.set_default_timeout(TIMEOUT_MS)
        yield pg
        browser.close()


@pytest.fixture(scope="module")
def models(ckpt_root):
    """The three tiny architectures by folder name (lens and patching tests)."""
    from viz_transformer import load_checkpoint
    return {n: load_checkpoint(ckpt_root / n) for n in ("tiny-zh-en", "tiny-lm", "tiny-prefix")}


@pytest.fixture(scope="module")
def zh_en():
    """The shipped translator."""
    from viz_transformer import load_checkpoint
    return load_checkpoint(ROOT / "checkpoints" / "zh-en")
