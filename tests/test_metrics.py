"""Answer and retrieval metrics on hand-made cases."""

from __future__ import annotations

import math

import pytest

from lychee_ray.metrics import (
    bleu1,
    evidence_recall,
    is_abstention,
    mean,
    normalize_answer,
    session_recall,
    token_f1,
)


def test_normalisation_lowercases_strips_punctuation_and_articles():
    assert normalize_answer("The  Support-Group, in MAY!") == "support group in may"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("“Theatre” — a play…") == "theatre play"  # typographic quotes/dashes too
    assert normalize_answer(None) == "" and normalize_answer("") == ""
    # articles only as whole words
    assert normalize_answer("Theresa and Anna") == "theresa and anna"


def test_token_f1_hand_cases():
    assert token_f1("7 May 2023", "7 May 2023") == 1.0
    assert token_f1("The 7 May, 2023.", "7 may 2023") == 1.0  # normalised
    # pred: caroline went on 7 may (5 tokens); gold: 7 may 2023 (3); common = 2
    p, r = 2 / 5, 2 / 3
    assert token_f1("Caroline went on 7 May", "7 May 2023") == pytest.approx(2 * p * r / (p + r))
    assert token_f1("pottery", "painting") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0 and token_f1("", "x") == 0.0
    # multiset: a repeated token only counts as often as the gold has it
    assert token_f1("dog dog dog", "dog") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))


def test_bleu1_hand_cases():
    assert bleu1("7 May 2023", "7 May 2023") == 1.0
    # longer candidate: no brevity penalty; precision 2/4
    assert bleu1("she went in may", "in may") == pytest.approx(0.5)
    # shorter candidate: precision 1, brevity penalty exp(1 - 3/1)
    assert bleu1("may", "7 may 2023") == pytest.approx(math.exp(1 - 3))
    # clipping: "may may may" vs "may" → 1/3
    assert bleu1("may may may", "may") == pytest.approx(1 / 3)
    assert bleu1("", "") == 1.0 and bleu1("a", "") == 1.0  # "a" normalises to empty
    assert bleu1("cat", "") == 0.0 and bleu1("", "cat") == 0.0


def test_evidence_and_session_recall():
    assert evidence_recall(["D1:3", "D2:5"], ["D1:2", "D1:3", "D1:4"]) == 0.5
    assert evidence_recall(["D1:3"], []) == 0.0
    assert evidence_recall([], ["D1:3"]) is None  # no gold evidence: not counted
    assert evidence_recall(["D1:3", "D1:3"], ["D1:3"]) == 1.0  # duplicates in gold count once
    ts = {"s1:0": "s1", "s1:1": "s1", "s2:0": "s2", "s3:4": "s3"}
    assert session_recall(["s1", "s2"], ["s1:1", "s3:4"], ts) == 0.5
    assert session_recall(["s1", "s2"], ["s1:0", "s2:0", "unknown"], ts) == 1.0
    assert session_recall([], ["s1:0"], ts) is None


def test_abstention_detection():
    for a in ["I don't know — the memory has no information about that.", "That was never mentioned.",
              "The conversation does not mention his age.", "Unknown", "", "It cannot be determined from the memories.",
              "There is not enough information to say."]:
        assert is_abstention(a), a
    for a in ["Business Administration", "She went to the support group on 7 May 2023.", "Known for pottery"]:
        assert not is_abstention(a), a


def test_mean_skips_none():
    assert mean([1.0, None, 0.0]) == 0.5
    assert mean([None]) is None and mean([]) is None
