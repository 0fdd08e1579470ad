"""What a class learned (viz_explorer/classroom/gain.py): a class built here, its votes stored (votes.py) and read
back, against a hand computation of the shares, the moves between votes and Hake's normalised gain; the CSV's rows
equal the votes given; the HTML summary escapes what students typed."""
from __future__ import annotations

import csv
import io
import secrets

import pytest

from viz_explorer.classroom import gain
from viz_explorer.classroom import store as cr
from viz_explorer.classroom import votes as cv
from viz_explorer.server import db

OPTS = ["A", "B", "C", "D"]
PRE, POST, PEER = "check/b/x-a", "check/b/x-b", "lesson/2"
RIGHT = {PRE: "B", POST: "C", PEER: "A", "poll": None}


def test_hake_against_its_definition():
    assert gain.hake(0.25, 0.625) == pytest.approx((0.625 - 0.25) / 0.75)      # 0.5
    assert gain.hake(0.5, 0.5) == 0 and gain.hake(0.8, 0.6) == pytest.approx(-1.0)
    assert gain.hake(1.0, 1.0) is None and gain.hake(None, 0.5) is None and gain.hake(0.2, None) is None


@pytest.fixture
def built(tmp_path):
    """Eight students: pre-check (4 of 8 right), post-check (6 of 8 right), a peer question voted twice."""
    eng = db.engine(f"sqlite:///{tmp_path / 'class.sqlite3'}")
    code, secret = cr.create_class("attention-step-by-step", eng)
    who = [secrets.token_urlsafe(12) for _ in range(8)]
    for i, b in enumerate(who):
        cr.join(code, b, "<b>Mei</b>" if i == 0 else "", eng)
    pre = ["B", "B", "B", "B", "A", "A", "C", "D"]
    post = ["C", "C", "C", "C", "C", "C", "A", "B"]
    peer1 = ["A", "B", "B", "C", "A", "D", "B", "A"]      # 3 right
    peer2 = ["A", "A", "A", "C", "B", "A", None, None]    # 6 voted, 4 right: s2, s3, s6 moved to A, s5 away, s1 stayed
    given = []
    for q, picks in ((PRE, pre), (POST, post), (PEER, peer1)):
        for i, (b, c) in enumerate(zip(who, picks)):
            cv.answer(code, b, q, c, OPTS, eng)
            given.append((i + 1, q, 1, c))
    cv.open_round(code, secret, PEER, eng, round=2)
    for i, (b, c) in enumerate(zip(who, peer2)):
        if c is not None:
            cv.answer(code, b, PEER, c, OPTS, eng)
            given.append((i + 1, PEER, 2, c))
    yield cv.class_votes(code, secret, eng), given
    eng.dispose()


def test_shares_moves_and_gain_of_a_class_equal_a_hand_computation(built):
    votes, _ = built
    assert gain.share(votes, PRE, "B") == gain.Share(4, 8) and gain.share(votes, POST, "C") == gain.Share(6, 8)
    rows = gain.question_rows(votes, RIGHT)
    peer = next(r for r in rows if r.question == PEER)
    assert (peer.first, peer.second) == (gain.Share(3, 8), gain.Share(4, 6))
    assert peer.moves == gain.Moves(to_right=3, to_wrong=1, stayed_right=1, stayed_wrong=1)
    concepts = gain.concept_rows(votes, {"x": (PRE, POST)}, RIGHT)
    assert len(concepts) == 1 and concepts[0].g == pytest.approx((6 / 8 - 4 / 8) / (1 - 4 / 8))     # 0.5
    pre, post, g = gain.class_gain(concepts)
    assert (pre, post) == (gain.Share(4, 8), gain.Share(6, 8)) and g == pytest.approx(0.5)


def test_the_csv_rows_are_the_votes_given(built):
    votes, given = built
    rows = list(csv.DictReader(io.StringIO(gain.csv_text(votes, RIGHT))))
    assert len(rows) == len(given)
    names = {1: "<b>Mei</b>"}
    assert sorted((r["student"], r["question"], int(r["round"]), r["choice"]) for r in rows) == \
        sorted((names.get(n, f"student {n}"), q, r, c) for n, q, r, c in given)
    assert all(r["right"] == str(int(r["choice"] == RIGHT[r["question"]])) for r in rows)


def test_the_html_summary_escapes_and_states_the_gain(built):
    votes, _ = built
    labels = {k: k for k in ("class", "concepts", "questions", "concept", "question", "pre", "post", "first",
                             "second", "to_right", "to_wrong")} | {"lang": "en"}
    page = gain.html_summary("Class <X>", labels, gain.question_rows(votes, RIGHT),
                             gain.concept_rows(votes, {"x": (PRE, POST)}, RIGHT), {PEER: "<script>alert(1)</script>"})
    assert "<script>" not in page and "&lt;script&gt;" in page and "Class &lt;X&gt;" in page
    assert "g = 0.50" in page and "50% (4/8)" in page and "75% (6/8)" in page
