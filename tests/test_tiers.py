"""The test tiers stay honest (pytest.ini's markers, tests/conftest.py): a test that drives Chromium or a real
streamlit server is `browser`, one that trains is `train`, and every `browser` or `train` test is `slow`, so
`-m "not slow"` never runs one; while the README's plain `python -m pytest` still runs every tier."""
from __future__ import annotations

import pytest

from conftest import ROOT, TIERS

# what in a test file's source means it drives a browser or a real server
BROWSER_SIGNS = ("sync_playwright", '"streamlit", "run"', "from stclient import")
TRAINING_FIXTURES = {"snap_root"}       # fixtures that run training (tests/test_app_architectures.py)
# a download walk -> the default-run file that checks the same on a folder made here in the same layout
CHEAPER = {"tests/test_real_minilm.py": "tests/test_st_folders.py",
           "tests/test_browser_lesson_screens.py": "tests/test_browser_lessons.py"}   # each lesson walked once a language


def collected(request, files) -> dict[str, set[str]]:
    """Mark names of every test of `files` collected in this session; skipped when one of them was not."""
    tiers = request.config.stash[TIERS]
    out = {}
    for f in files:
        ids = {n: marks for n, (marks, _) in tiers.items() if n.split("::")[0] == f"tests/{f.name}"}
        if not ids:
            pytest.skip(f"run with the whole tests folder: {f.name} was not collected")
        out.update(ids)
    return out


def test_browser_files_and_files_that_start_a_server_are_browser_and_slow(request):
    files = sorted(f for f in (ROOT / "tests").glob("test_*.py") if f.name != "test_tiers.py" and
                   (f.name.startswith("test_browser") or any(s in f.read_text(encoding="utf-8") for s in BROWSER_SIGNS)))
    assert len(files) >= 10                                          # 8 browser files, concurrency, deploy
    unmarked = [n for n, m in collected(request, files).items() if not {"browser", "slow"} <= m]
    assert not unmarked, unmarked


def test_training_tests_are_train_and_every_browser_or_train_test_is_slow(request):
    tiers = request.config.stash[TIERS]
    assert not [n for n, (m, fx) in tiers.items() if fx & TRAINING_FIXTURES and "train" not in m]
    assert not [n for n, (m, _) in tiers.items() if m & {"browser", "train"} and "slow" not in m]
    train = collected(request, [ROOT / "tests" / "test_core_train.py"])
    assert sum("train" in m for m in train.values()) >= 3           # its three training runs at least


def test_the_marks_are_registered_strict_and_no_tier_is_the_default(request):
    names = {line.split(":")[0].strip() for line in request.config.getini("markers")}
    assert {"slow", "browser", "train"} <= names
    addopts = request.config.getini("addopts")
    assert "--strict-markers" in addopts                             # a misspelt mark is an error
    # plain `python -m pytest` runs every tier but the walks, which `-m walk` runs (its -m replaces addopts')
    assert [addopts[i + 1] for i, a in enumerate(addopts) if a == "-m"] == ["not walk"]
    assert "walk" in names


def test_the_walks_are_browser_tests_each_with_a_cheaper_check_in_the_default_run(request):
    tiers = request.config.stash[TIERS]
    walks = {n for n, (m, _) in tiers.items() if "walk" in m}
    if not walks:
        pytest.skip("run with the whole tests folder")
    downloads = {n for n, (m, _) in tiers.items() if "download" in m}
    assert downloads <= walks, sorted(downloads - walks)             # the network only in the walks
    assert all({"browser", "slow"} <= tiers[n][0] for n in walks - downloads)
    # what each walk sweeps, the default run checks once (tests/test_browser_legibility*.py: every page once in
    # each language; test_browser_phone.py: one page's phone layout; test_browser_class_access.py: the teacher's
    # right across a reload; test_browser_long.py: a long text on the Attention page); a downloaded folder's
    # checks run in the default run on a folder made here in its layout (CHEAPER)
    for f in {n.split("::")[0] for n in walks}:
        home = CHEAPER.get(f, f)
        assert any(n.split("::")[0] == home and "walk" not in m for n, (m, _) in tiers.items()), f
