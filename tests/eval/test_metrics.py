"""Answer and retrieval metrics on hand-made cases.

The LoCoMo F1 / BLEU-1 cases are worked by hand from the reference definitions (LoCoMo's
``task_eval/evaluation.py``; Mem0's ``evaluation/metrics/utils.py``), not computed by the code.
"""

from __future__ import annotations

import math

import pytest

from lychee_ray.eval.metrics.evidence import evidence_recall, is_abstention, mean, session_recall
from lychee_ray.eval.metrics.locomo import (
    bleu1,
    locomo_f1,
    locomo_f1_multi,
    locomo_f1_single,
    locomo_gold,
    locomo_normalize,
    word_tokens,
)


def test_locomo_normalisation():
    # commas deleted; punctuation deleted (not spaced: "support-group" -> "supportgroup"); a/an/the AND "and" dropped
    assert locomo_normalize("The Support-Group, in MAY!") == "supportgroup in may"
    assert locomo_normalize("Theresa and Anna") == "theresa anna"
    assert locomo_normalize("An apple a day") == "apple day"
    assert locomo_normalize(2022) == "2022" and locomo_normalize(None) == ""


def test_locomo_f1_single_stems_and_counts():
    # she went run in may | run in may: 3 common of 5 predicted, 3 gold -> P=3/5, R=1 -> F1 = 0.75
    assert locomo_f1_single("She went running in May", "running in may") == pytest.approx(0.75)
    assert locomo_f1_single("adopting", "adopted") == 1.0  # Porter: both "adopt" (SQuAD F1 would give 0)
    assert locomo_f1_single("7 May, 2023", "7 May 2023") == 1.0
    assert locomo_f1_single("pottery", "painting") == 0.0
    assert locomo_f1_single("", "") == 0.0  # no common token -> 0, as in the reference
    # multiset: dog dog dog | dog -> 1 common, P=1/3, R=1 -> 0.5
    assert locomo_f1_single("dog dog dog", "dog") == pytest.approx(0.5)


def test_locomo_f1_per_category():
    # category 1: gold parts painting / swimming / pottery, best prediction part 1, 0, 1 -> 2/3
    assert locomo_f1("pottery, painting", "painting, swimming, pottery", "1") == pytest.approx(2 / 3)
    assert locomo_f1_multi("pottery, painting", "painting, swimming, pottery") == pytest.approx(2 / 3)
    # one prediction part "pottery painting" vs each gold part: P=1/2, R=1 -> 2/3 each -> 2/3
    assert locomo_f1("pottery and painting", "pottery, painting", "1") == pytest.approx(2 / 3)
    # the same strings in category 4 are one answer each: identical after comma and "and" removal
    assert locomo_f1("pottery and painting", "pottery, painting", "4") == 1.0
    # category 3: gold cut at ';'
    assert locomo_gold("Likely yes; she mentioned wanting to", "3") == "Likely yes"
    assert locomo_f1("likely yes", "Likely yes; she mentioned wanting to", "3") == 1.0
    # ... not in other categories: 2 common of 6 gold stems (like ye she mention want to) -> P=1, R=1/3 -> 0.5
    assert locomo_f1("likely yes", "Likely yes; she mentioned wanting to", "4") == pytest.approx(0.5)


def test_bleu1_is_mem0s_smoothed_unigram_bleu():
    # in may | she went in may: unigram precision 2/2, brevity penalty exp(1 - 4/2)
    assert bleu1("in may", "she went in may") == pytest.approx(math.exp(-1))
    assert bleu1("may may may", "may") == pytest.approx(1 / 3)  # clipped counts, no brevity penalty (c > r)
    assert bleu1("Pottery.", "pottery") == pytest.approx(0.5)  # word_tokenize keeps "." as a token
    assert bleu1("7 May 2023", "7 may 2023") == 1.0  # lower-cased
    assert bleu1("cat", "dog") == 0.0  # no unigram match: 0 (smoothing only touches higher orders)
    assert bleu1("", "cat") == 0.0 and bleu1("cat", "") == 0.0 and bleu1(None, "cat") == 0.0


def test_word_tokens_match_nltk_word_tokenize_without_punkt():
    assert word_tokens("She went, didn't she?") == ["she", "went", ",", "did", "n't", "she", "?"]
    assert word_tokens("Yes. She did.") == ["yes", ".", "she", "did", "."]  # sentence split by regex, not punkt


def test_scoring_reads_no_nltk_data(monkeypatch):
    import nltk

    def no_data(*a, **k):
        raise AssertionError("nltk data requested")

    monkeypatch.setattr(nltk.data, "find", no_data)
    monkeypatch.setattr(nltk.data, "load", no_data)
    monkeypatch.setattr(nltk, "download", no_data)
    assert locomo_f1("Running, swimming", "swimming, running", "1") == 1.0
    assert bleu1("she ran home. then slept", "she ran home") > 0


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
